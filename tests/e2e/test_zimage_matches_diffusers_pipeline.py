"""The Z-Image-Turbo workflow on the tiny demo files gives diffusers' ZImagePipeline's image on the same files:
prompt encoding, schedule, sampling, classifier-free guidance, latent format and VAE decoding agree end to end
(Z-Image is not in ComfyUI 0.3.64, so diffusers is the oracle)."""

from __future__ import annotations

import asyncio
import gzip
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from safetensors.torch import load_file

REPO = Path(__file__).resolve().parents[2]
STEPS, SEED = 4, 42
# Qwen3's chat template without a system message and with thinking enabled (as ZImagePipeline asks for it).
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def diffusers_pipeline(models: Path):
    """ZImagePipeline assembled from the demo files (transformers' Qwen3Model, diffusers' AutoencoderKL with
    Flux's latent scale and shift, a plain Euler flow scheduler that takes the sigmas as given)."""
    from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, ZImagePipeline
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3Model

    from nodes.models.qwen_tokenizer import SHIPPED_FILE
    from nodes.models.vae import diffusers_config, ldm_to_diffusers
    from nodes.models.zimage import infer_config, make_transformer, to_diffusers_layout
    from nodes.models.zimage_demo import FILES

    sd = to_diffusers_layout(load_file(models / FILES["transformer"]))
    transformer = make_transformer(*infer_config(sd))
    transformer.load_state_dict(sd)
    te_sd = {k[len("model.") :]: v for k, v in load_file(models / FILES["text_encoder"]).items()}
    te = Qwen3Model(
        Qwen3Config(
            vocab_size=151936,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=28,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            rope_theta=1e6,
            rms_norm_eps=1e-6,
            max_position_embeddings=40960,
        )
    )
    te.load_state_dict(te_sd)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(gzip.decompress(SHIPPED_FILE.read_bytes()).decode()),
        pad_token="<|endoftext|>",
        padding_side="right",
    )
    tok.chat_template = CHAT_TEMPLATE
    vsd = ldm_to_diffusers(load_file(models / FILES["vae"]))
    vae = AutoencoderKL(**diffusers_config(vsd), scaling_factor=0.3611, shift_factor=0.1159)
    vae.load_state_dict(vsd)
    return ZImagePipeline(
        scheduler=FlowMatchEulerDiscreteScheduler(shift=1.0, use_dynamic_shifting=False),
        vae=vae.eval(),
        text_encoder=te.eval(),
        tokenizer=tok,
        transformer=transformer.eval(),
    )


def comfy_simple_sigmas(shift: float, steps: int) -> list[float]:
    """ComfyUI's "simple" schedule on ModelSamplingAuraFlow's table (without the final 0)."""
    t = torch.arange(1, 1001, dtype=torch.float32) / 1000
    table = shift * t / (1 + (shift - 1) * t)
    return [float(table[-(1 + int(i * len(table) / steps))]) for i in range(steps)]


@pytest.mark.parametrize("cfg", [1.0, 2.5])
def test_workflow_image_is_diffusers_pipelines(demo_workspace, fixed_threads, cfg):
    from comfy_bridge.cli.run import run_prompt
    from comfy_bridge.registry import build_registry

    prompt = json.loads((REPO / "workflows_json" / "z_image_turbo.json").read_text())
    prompt["70"]["inputs"].update(sampler_name="euler", scheduler="simple", steps=STEPS, seed=SEED, cfg=cfg)
    prompt["9"]["inputs"]["filename_prefix"] = f"zimage_oracle_{cfg}"
    (png,) = asyncio.run(run_prompt(prompt, None, build_registry(demo_workspace), show_progress=False))
    ours = np.asarray(Image.open(png)).astype(int)

    pipe = diffusers_pipeline(demo_workspace.models_dir)
    noise = torch.randn((1, 16, 16, 16), generator=torch.Generator().manual_seed(SEED))  # ComfyUI's noise
    with torch.no_grad():
        ref = pipe(
            prompt=prompt["67"]["inputs"]["text"],
            negative_prompt=prompt["71"]["inputs"]["text"],
            height=128,
            width=128,
            num_inference_steps=STEPS,
            latents=noise,
            sigmas=comfy_simple_sigmas(prompt["69"]["inputs"]["shift"], STEPS),
            guidance_scale=cfg - 1.0,  # diffusers' guidance g is ComfyUI's cfg g + 1; 0 = no negative pass
            output_type="np",
        ).images[0]
    expected = np.clip(ref * 255, 0, 255).astype(np.uint8).astype(int)  # SaveImage truncates
    assert ours.shape == expected.shape == (128, 128, 3)
    assert np.abs(ours - expected).max() <= 1
    assert np.mean(ours != expected) < 0.01
