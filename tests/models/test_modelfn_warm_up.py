"""The core ModelFns' warm-up imports the model code their first load would import and builds the shipped
tokenizers (seconds), so an executor that warmed up before registering pays none of it in its first prompt."""

from __future__ import annotations

import subprocess
import sys

MODEL_CODE = (
    "diffusers.models.unets.unet_2d_condition",
    "diffusers.models.autoencoders.autoencoder_kl",
    "transformers.models.clip.modeling_clip",
)


def test_warm_up_all_imports_the_sd_model_code_in_a_fresh_process():
    probe = (
        "import sys\n"
        "import nodes.modelfns\n"
        f"before = [m for m in {MODEL_CODE!r} if m in sys.modules]\n"
        "from cluster.modelfn import warm_up_all\n"
        "names = warm_up_all()\n"
        f"after = [m for m in {MODEL_CODE!r} if m in sys.modules]\n"
        "from nodes.models.tokenizer import SHIPPED_VOCAB, byte_level_bpe, _openai_bpe\n"
        "built = byte_level_bpe.cache_info().currsize + _openai_bpe.cache_info().currsize\n"
        "print(before, after, 'denoise_step' in names and 'text_encode' in names and 'vae_decode' in names,\n"
        "      built)\n"
    )
    out = (
        subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
        .stdout.strip()
        .splitlines()[-1]
    )
    assert out == f"[] {list(MODEL_CODE)!r} True 2"  # and the shipped tokenizers built
