"""The web UI's FLUX 3 Image Klein text-to-image template (workflows_json/flux3_klein_t2i.json, written by
scripts/flux3_workflow.py: the template's node graph unpacked from its subgraph, the tiny flux3 files and
flux2-klein-tiny's VAE substituted, 8 steps at 0.1 megapixels, the prompt upsampler switched off): UNETLoader,
CLIPLoader flux3 -> CLIPTextEncode for the prompt and the empty negative, EmptyFlux2LatentImage from
ResolutionSelector, KSampler euler/simple cfg 3.5, VAEDecode, SaveImage, and the layout branch (Create Bounding
Boxes -> FLUX 3 Image Layout Prompt -> Preview Any). And the image-edit template (workflows_json/
flux3_klein_image_edit.json, same script): Load Image (input/example.png) -> Set Reference Multi Latent ->
KSampler (cfg 1 as shipped) on its empty latent, the prompt FLUX 3 Image Layout Prompt's text with the template's
drawn box, the upsampler switched off; its Image Compare is not run (below).

No ComfyUI that runs here has FLUX 3 and its source was not readable, so the reference is diffusers 0.42's Flux3
modular pipeline (Flux3AutoBlocks without its prompt-upsampler step, which the template's switch leaves off) run
on the same tiny files: the image equals it within 1/255. From a fresh, empty workspace (serve builds the demo
files on its first start) the image is the same with the default executors and with `--executors 0`.

The edit template's Image Compare slider (compare_view), which the saved template carries no value for, is sent as
the web UI sends it (['', '']; tests/engine/test_formats.py), so that output validates."""

from __future__ import annotations

import asyncio
import gzip
import json
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from safetensors.torch import load_file

from scripts.flux3_workflow import (
    DISTILLED_EDIT,
    DISTILLED_EDIT_TEMPLATE,
    DISTILLED_INNER,
    DISTILLED_TEMPLATE,
    EDIT_TEMPLATE,
    SEED,
    STEPS,
    TEMPLATE,
    tiny_edit_template,
    tiny_template,
)
from tests.e2e.served import render_with_serve

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "workflows_json" / "flux3_klein_t2i"
EDIT = REPO / "workflows_json" / "flux3_klein_image_edit"
DISTILLED = REPO / "workflows_json" / "flux3_klein_distilled_t2i"
DISTILLED_EDIT_FILE = REPO / "workflows_json" / "flux3_klein_distilled_image_edit"
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


def diffusers_image(
    models: Path,
    prompt: str,
    negative: str,
    size: int,
    cfg: float = 3.5,
    image: Image.Image | None = None,
    distilled: bool = False,
) -> np.ndarray:
    """diffusers' Flux3 modular pipeline on the demo files: its own text encoding, ids, schedule (shift 6.93),
    classifier-free guidance at `cfg`, Euler steps and the FLUX.2 VAE's de-standardising decode; with `image`, its
    own reference encoding (a single reference is kept whole: under 4 megapixels and on the 16-pixel grid it is
    neither resized nor padded) and its image-conditioned denoising, the generation at the reference's size;
    `distilled`: Flux3DistilledAutoBlocks on the flow-map model (no guidance, each step given the next timestep)."""
    from diffusers import AutoencoderKLFlux2, FlowMatchEulerDiscreteScheduler
    from diffusers.guiders import ClassifierFreeGuidance
    from diffusers.modular_pipelines import Flux3AutoBlocks, Flux3DistilledAutoBlocks
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

    blocks = Flux3DistilledAutoBlocks() if distilled else Flux3AutoBlocks()
    blocks.sub_blocks.pop("prompt_upsampler")
    pipe = blocks.init_pipeline()
    pipe.update_components(
        transformer=tiny_transformer(flow_map=distilled),
        vae=vae.eval(),
        text_encoder=text_encoder,
        tokenizer=Processor(),
        scheduler=FlowMatchEulerDiscreteScheduler(shift=6.93),
        **({} if distilled else {"guider": ClassifierFreeGuidance(guidance_scale=cfg)}),
    )
    (out,) = pipe(
        prompt=prompt,
        **({} if distilled else {"negative_prompt": negative}),
        **({"image": image} if image is not None else {"height": size, "width": size}),
        num_inference_steps=STEPS,
        generator=torch.Generator().manual_seed(SEED),  # ComfyUI's CPU noise for the seed
        output_type="np",
        output="images",
    )
    return np.clip(out * 255, 0, 255).astype(np.uint8)  # SaveImage truncates


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


# ---- the image-edit template ------------------------------------------------------------------------------------

# What FLUX 3 Image Layout Prompt makes of the template's prompt and its one box (x 128..864 of 896, y 192..1088
# of 1152: rows 167..944 and columns 143..964 of the 0-1000 grid), written out here by hand.
EDIT_TEXT = (
    'In <ref_image_0>, change the dress color <obj_1> to red [{"id": "obj_1", "bbox": [167, 143, 944, 964], '
    '"desc": "dress"}]'
)


def test_shipped_edit_workflow_is_the_templates_graph() -> None:
    from scripts.templates_coverage import templates_dir

    template = json.loads((templates_dir() / f"{EDIT_TEMPLATE}.json").read_text())
    ui = json.loads(EDIT.with_suffix(".ui.json").read_text())
    assert ui == tiny_edit_template()
    assert sorted(n["type"] for n in ui["nodes"]) == sorted(n["type"] for n in template["nodes"])
    assert len(ui["links"]) == len(template["links"])


def test_edit_image_is_the_diffusers_pipelines(demo_workspace, fixed_threads) -> None:
    from comfy_bridge.cli.run import run_prompt
    from comfy_bridge.registry import build_registry

    prompt = json.loads(EDIT.with_suffix(".json").read_text())
    prompt["9"]["inputs"]["filename_prefix"] = "flux3_edit_oracle"
    (png,) = asyncio.run(run_prompt(prompt, None, build_registry(demo_workspace), show_progress=False))
    ours = np.asarray(Image.open(png)).astype(int)
    sampler = prompt["7"]["inputs"]
    assert (sampler["seed"], sampler["steps"], sampler["cfg"]) == (SEED, STEPS, 1)
    assert prompt["51"]["inputs"]["switch"] is True and prompt["17"]["inputs"]["resolution"] == "keep resolution"
    photo = Image.open(demo_workspace.input_dir / prompt["54"]["inputs"]["image"]).convert("RGB")
    expected = diffusers_image(demo_workspace.models_dir, EDIT_TEXT, "", 0, cfg=1.0, image=photo).astype(int)
    assert ours.shape == expected.shape == (photo.height, photo.width, 3) and ours.std() > 0
    diff = np.abs(ours - expected)
    assert diff.max() <= 1, f"{int((diff > 1).sum())} values differ by more than 1/255"


def test_edit_template_renders_the_same_in_both_executor_modes(tmp_path) -> None:
    prompt = json.loads(EDIT.with_suffix(".json").read_text())
    workspace = tmp_path / "fresh"
    default = render_with_serve(workspace, tmp_path / "default.log", prompt)
    in_process = render_with_serve(workspace, tmp_path / "executors0.log", prompt, "--executors", "0")
    assert default.shape == (128, 128, 3) and default.std() > 0
    assert np.array_equal(default, in_process), (
        f"{int((default != in_process).sum())} values differ between the executor modes"
    )


# ---- the step-distilled text-to-image template ----------------------------------------------------------------


def test_shipped_distilled_workflow_is_the_templates_graph() -> None:
    from scripts.templates_coverage import templates_dir

    template = json.loads((templates_dir() / f"{DISTILLED_TEMPLATE}.json").read_text())
    ids = {sg["id"] for sg in template["definitions"]["subgraphs"]}
    inner = [n["type"] for sg in template["definitions"]["subgraphs"] for n in sg["nodes"]]
    outer = [n["type"] for n in template["nodes"] if n["type"] not in ids]
    ui = json.loads(DISTILLED.with_suffix(".ui.json").read_text())
    assert ui == tiny_template(DISTILLED_TEMPLATE, DISTILLED_INNER)
    assert sorted(n["type"] for n in ui["nodes"]) == sorted(inner + outer)


def test_distilled_image_is_the_diffusers_distilled_pipelines(demo_workspace, fixed_threads) -> None:
    """The flow-map model under KSampler (euler/simple, cfg 1): each step passes the next sigma of the schedule,
    as diffusers' Flux3DistilledAutoBlocks passes the next timestep."""
    from comfy_bridge.cli.run import run_prompt
    from comfy_bridge.registry import build_registry

    prompt = json.loads(DISTILLED.with_suffix(".json").read_text())
    prompt["9"]["inputs"]["filename_prefix"] = "flux3_distilled_oracle"
    (png,) = asyncio.run(run_prompt(prompt, None, build_registry(demo_workspace), show_progress=False))
    ours = np.asarray(Image.open(png)).astype(int)
    sampler = prompt["7"]["inputs"]
    assert (sampler["seed"], sampler["steps"], sampler["cfg"], sampler["sampler_name"], sampler["scheduler"]) == (
        SEED,
        STEPS,
        1.0,
        "euler",
        "simple",
    )
    assert prompt["1"]["inputs"]["unet_name"] == "flux3_klein_distilled_tiny.safetensors"
    expected = diffusers_image(
        demo_workspace.models_dir, prompt["17"]["inputs"]["value"], "", ours.shape[0], distilled=True
    ).astype(int)
    assert ours.shape == expected.shape and ours.shape[0] == ours.shape[1] and ours.std() > 0
    diff = np.abs(ours - expected)
    assert diff.max() <= 1, f"{int((diff > 1).sum())} values differ by more than 1/255"


def test_distilled_edit_image_is_the_diffusers_distilled_pipelines(demo_workspace, fixed_threads) -> None:
    """The step-distilled image-edit template: the flow-map model with the photo's reference latent and the
    layout prompt over the template's drawn box (x 512..736 of 1360, y 288..512 of 752: rows 383..681, columns
    376..541 of the 0-1000 grid, written out here by hand)."""
    from comfy_bridge.cli.run import run_prompt
    from comfy_bridge.registry import build_registry
    from scripts.templates_coverage import templates_dir

    ui = json.loads(DISTILLED_EDIT_FILE.with_suffix(".ui.json").read_text())
    assert ui == tiny_edit_template(DISTILLED_EDIT_TEMPLATE, DISTILLED_EDIT)
    template = json.loads((templates_dir() / f"{DISTILLED_EDIT_TEMPLATE}.json").read_text())
    assert sorted(n["type"] for n in ui["nodes"]) == sorted(n["type"] for n in template["nodes"])
    prompt = json.loads(DISTILLED_EDIT_FILE.with_suffix(".json").read_text())
    prompt["9"]["inputs"]["filename_prefix"] = "flux3_distilled_edit_oracle"
    (png,) = asyncio.run(run_prompt(prompt, None, build_registry(demo_workspace), show_progress=False))
    ours = np.asarray(Image.open(png)).astype(int)
    assert prompt["1"]["inputs"]["unet_name"] == "flux3_klein_distilled_tiny.safetensors"
    assert (prompt["7"]["inputs"]["steps"], prompt["7"]["inputs"]["cfg"], prompt["51"]["inputs"]["switch"]) == (
        STEPS,
        1,
        True,
    )
    text = prompt["49"]["inputs"]["prompt"] + ' [{"id": "obj_1", "bbox": [383, 376, 681, 541], "desc": "earring"}]'
    photo = Image.open(demo_workspace.input_dir / prompt["11"]["inputs"]["image"]).convert("RGB")
    expected = diffusers_image(demo_workspace.models_dir, text, "", 0, image=photo, distilled=True).astype(int)
    assert ours.shape == expected.shape == (photo.height, photo.width, 3) and ours.std() > 0
    diff = np.abs(ours - expected)
    assert diff.max() <= 1, f"{int((diff > 1).sum())} values differ by more than 1/255"
