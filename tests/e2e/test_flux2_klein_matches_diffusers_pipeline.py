"""The FLUX.2 Klein workflow (workflows_json/flux2_klein.json) on the tiny demo files gives diffusers'
Flux2KleinPipeline's image on the same files: prompt template and hidden-state taps, schedule (Flux2Scheduler's
sigmas against the pipeline's empirical mu), sampling, latent format and the VAE's batch-norm de-standardising
agree end to end (FLUX.2 is not in ComfyUI 0.3.64, so diffusers is the oracle)."""

from __future__ import annotations

import asyncio
import gzip
import json
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from safetensors.torch import load_file

REPO = Path(__file__).resolve().parents[2]
SEED = 42
# Qwen3's chat template as it treats one user message (no system prompt) and enable_thinking=False.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% if enable_thinking is defined and "
    "enable_thinking is false %}<think>\n\n</think>\n\n{% endif %}{% endif %}"
)


def diffusers_pipeline(models: Path, tmp: Path):
    """Flux2KleinPipeline assembled from the demo files: the transformer read by diffusers' own single-file loader,
    transformers' Qwen3Model, AutoencoderKLFlux2, FlowMatchEulerDiscreteScheduler with dynamic shifting."""
    from diffusers import (
        AutoencoderKLFlux2,
        FlowMatchEulerDiscreteScheduler,
        Flux2KleinPipeline,
        Flux2Transformer2DModel,
    )
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3Model

    from nodes.models.flux2_demo import FILES, QWEN3_LAYERS, QWEN3_VOCAB, TEXT_WIDTH, tiny_transformer
    from nodes.models.flux2_vae import to_diffusers_layout
    from nodes.models.qwen_tokenizer import SHIPPED_FILE

    (tmp / "transformer").mkdir(parents=True)
    tiny_transformer().save_config(tmp / "transformer")
    transformer = Flux2Transformer2DModel.from_single_file(
        str(models / FILES["transformer"]), config=str(tmp), subfolder="transformer", local_files_only=True
    )
    te = Qwen3Model(
        Qwen3Config(
            vocab_size=QWEN3_VOCAB,
            hidden_size=TEXT_WIDTH,
            intermediate_size=2 * TEXT_WIDTH,
            num_hidden_layers=QWEN3_LAYERS,
            num_attention_heads=2,
            num_key_value_heads=1,
            head_dim=TEXT_WIDTH // 2,
            rope_theta=1e6,
            rms_norm_eps=1e-6,
            max_position_embeddings=40960,
        )
    )
    te.load_state_dict({k[len("model.") :]: v for k, v in load_file(models / FILES["text_encoder"]).items()})
    vocab = Tokenizer.from_str(gzip.decompress(SHIPPED_FILE.read_bytes()).decode())
    tok = PreTrainedTokenizerFast(tokenizer_object=vocab, pad_token="<|endoftext|>", padding_side="right")
    tok.chat_template = CHAT_TEMPLATE
    vae = AutoencoderKLFlux2(
        block_out_channels=(32, 32, 32, 32), layers_per_block=1, latent_channels=32, norm_num_groups=32
    )
    vae.load_state_dict(to_diffusers_layout(load_file(models / FILES["vae"]), None))
    return Flux2KleinPipeline(
        scheduler=FlowMatchEulerDiscreteScheduler(use_dynamic_shifting=True),
        vae=vae.eval(),
        text_encoder=te.eval(),
        tokenizer=tok,
        transformer=transformer.eval(),
        is_distilled=True,
    )


def test_workflow_image_is_the_klein_pipelines(demo_workspace, fixed_threads, tmp_path):
    from comfy_bridge.cli.run import run_prompt
    from comfy_bridge.registry import build_registry

    prompt = json.loads((REPO / "workflows_json" / "flux2_klein.json").read_text())
    prompt["9"]["inputs"]["filename_prefix"] = "flux2_oracle"
    (png,) = asyncio.run(run_prompt(prompt, None, build_registry(demo_workspace), show_progress=False))
    ours = np.asarray(Image.open(png)).astype(int)

    steps, size = prompt["62"]["inputs"]["steps"], prompt["68"]["inputs"]["value"]
    assert prompt["73"]["inputs"]["noise_seed"] == SEED and prompt["63"]["inputs"]["cfg"] == 1.0
    pipe = diffusers_pipeline(demo_workspace.models_dir, tmp_path)
    noise = torch.randn((1, 128, size // 16, size // 16), generator=torch.Generator().manual_seed(SEED))  # ComfyUI's
    with torch.no_grad():
        ref = pipe(
            prompt=prompt["74"]["inputs"]["text"],
            height=size,
            width=size,
            num_inference_steps=steps,
            guidance_scale=1.0,
            latents=noise,
            output_type="np",
        ).images[0]
    expected = np.clip(ref * 255, 0, 255).astype(np.uint8).astype(int)  # SaveImage truncates
    assert ours.shape == expected.shape == (size, size, 3)
    diff = np.abs(ours - expected)
    assert diff.max() <= 1
    assert np.mean(diff > 0) < 0.01
