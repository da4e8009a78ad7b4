"""The web UI's FLUX 3 Image Klein text-to-image template (workflows_json/flux3_klein_t2i.json, written by
scripts/flux3_workflow.py: the template's node graph unpacked from its subgraph, the tiny flux3 files and
flux2-klein-tiny's VAE substituted, 8 steps at 0.1 megapixels, the prompt upsampler switched off): UNETLoader,
CLIPLoader flux3 -> CLIPTextEncode for the prompt and the empty negative, EmptyFlux2LatentImage from
ResolutionSelector, KSampler euler/simple cfg 3.5, VAEDecode, SaveImage, and the layout branch (Create Bounding
Boxes -> FLUX 3 Image Layout Prompt -> Preview Any).

No ComfyUI that runs here has FLUX 3 and its source was not readable, so the reference is diffusers 0.42's Flux3
modular pipeline (Flux3AutoBlocks without its prompt-upsampler step, which the template's switch leaves off) run
on the same tiny files: the image equals it within 1/255. From a fresh, empty workspace (serve builds the demo
files on its first start) the image is the same with the default executors and with `--executors 0`."""

from __future__ import annotations

import asyncio
import gzip
import json
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from safetensors.torch import load_file

from scripts.flux3_workflow import SEED, STEPS, TEMPLATE, tiny_template
from tests.e2e.test_qwen_image_edit_workflow import render_with_serve

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "workflows_json" / "flux3_klein_t2i"
# Qwen3-VL instruct's chat template as it treats one user message (no default system turn).
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def test_shipped_ui_workflow_is_the_templates_graph() -> None:
    from scripts.templates_coverage import templates_dir

    template = json.loads((templates_dir() / f"{TEMPLATE}.json").read_text())
    ids = {sg["id"] for sg in template["definitions"]["subgraphs"]}
    inner = [n["type"] for sg in template["definitions"]["subgraphs"] for n in sg["nodes"]]
    outer = [n["type"] for n in template["nodes"] if n["type"] not in ids]
    ui = json.loads(SHIPPED.with_suffix(".ui.json").read_text())
    assert ui == tiny_template()
    assert sorted(n["type"] for n in ui["nodes"]) == sorted(inner + outer)


def diffusers_image(models: Path, prompt: str, negative: str, size: int) -> np.ndarray:
    """diffusers' Flux3 modular pipeline on the demo files: its own text encoding, ids, schedule (shift 6.93),
    classifier-free guidance at 3.5, Euler steps and the FLUX.2 VAE's de-standardising decode."""
    from diffusers import AutoencoderKLFlux2, FlowMatchEulerDiscreteScheduler
    from diffusers.guiders import ClassifierFreeGuidance
    from diffusers.modular_pipelines import Flux3AutoBlocks
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    from nodes.models.flux2_demo import FILES
    from nodes.models.flux2_vae import to_diffusers_layout
    from nodes.models.flux3_demo import TEXT_FILE, tiny_text_encoder, tiny_transformer
    from nodes.models.qwen_tokenizer import SHIPPED_FILE

    text_encoder = tiny_text_encoder()
    text_encoder.load_state_dict(load_file(models / TEXT_FILE), strict=False)  # no lm_head in the file; unused
    vae = AutoencoderKLFlux2(
        block_out_channels=(32, 32, 32, 32), layers_per_block=1, latent_channels=32, norm_num_groups=32
    )
    vae.load_state_dict(to_diffusers_layout(load_file(models / FILES["vae"]), None))
    vocab = Tokenizer.from_str(gzip.decompress(SHIPPED_FILE.read_bytes()).decode())
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=vocab, pad_token="<|endoftext|>")
    tokenizer.chat_template = CHAT_TEMPLATE

    class Processor:  # what the text encoder step reads of Qwen3-VL's AutoProcessor
        def __init__(self) -> None:
            self.tokenizer = tokenizer

        def apply_chat_template(self, *args, **kwargs):
            return tokenizer.apply_chat_template(*args, **kwargs)

    blocks = Flux3AutoBlocks()
    blocks.sub_blocks.pop("prompt_upsampler")
    pipe = blocks.init_pipeline()
    pipe.update_components(
        transformer=tiny_transformer(),
        vae=vae.eval(),
        text_encoder=text_encoder,
        tokenizer=Processor(),
        scheduler=FlowMatchEulerDiscreteScheduler(shift=6.93),
        guider=ClassifierFreeGuidance(guidance_scale=3.5),
    )
    (image,) = pipe(
        prompt=prompt,
        negative_prompt=negative,
        height=size,
        width=size,
        num_inference_steps=STEPS,
        generator=torch.Generator().manual_seed(SEED),  # ComfyUI's CPU noise for the seed
        output_type="np",
        output="images",
    )
    return np.clip(image * 255, 0, 255).astype(np.uint8)  # SaveImage truncates


def test_workflow_image_is_the_diffusers_pipelines(demo_workspace, fixed_threads) -> None:
    from comfy_bridge.cli.run import run_prompt
    from comfy_bridge.registry import build_registry

    prompt = json.loads(SHIPPED.with_suffix(".json").read_text())
    prompt["9"]["inputs"]["filename_prefix"] = "flux3_oracle"
    (png,) = asyncio.run(run_prompt(prompt, None, build_registry(demo_workspace), show_progress=False))
    ours = np.asarray(Image.open(png)).astype(int)
    sampler = prompt["7"]["inputs"]
    assert (sampler["seed"], sampler["steps"], sampler["cfg"], sampler["sampler_name"], sampler["scheduler"]) == (
        SEED,
        STEPS,
        3.5,
        "euler",
        "simple",
    )
    assert prompt["16"]["inputs"]["switch"] is False  # the upsampler off: CLIPTextEncode reads the prompt as typed
    expected = diffusers_image(
        demo_workspace.models_dir, prompt["17"]["inputs"]["value"], prompt["5"]["inputs"]["text"], ours.shape[0]
    ).astype(int)
    assert ours.shape == expected.shape == (320, 320, 3) and ours.std() > 0
    diff = np.abs(ours - expected)
    assert diff.max() <= 1, f"{int((diff > 1).sum())} values differ by more than 1/255"


def test_template_renders_the_same_in_both_executor_modes(tmp_path) -> None:
    prompt = json.loads(SHIPPED.with_suffix(".json").read_text())
    workspace = tmp_path / "fresh"
    default = render_with_serve(workspace, tmp_path / "default.log", prompt)
    in_process = render_with_serve(workspace, tmp_path / "executors0.log", prompt, "--executors", "0")
    assert default.shape == (320, 320, 3) and default.std() > 0
    assert np.array_equal(default, in_process), (
        f"{int((default != in_process).sum())} values differ between the executor modes"
    )
