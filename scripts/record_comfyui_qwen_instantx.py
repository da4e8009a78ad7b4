"""Record what ComfyUI samples with qwen-image-tiny steered by the tiny Qwen-Image InstantX ControlNets (Union and
Inpainting), as the fixture our support is tested on (tests/nodes/fixtures/comfyui_qwen_instantx.json.xz).

Run inside ComfyUI's own environment (it imports ComfyUI's modules; nothing of ComfyUI is copied here), after
`comfy-cluster demo-models` (or nodes.models.qwen_image_demo and nodes.models.qwen_image_controlnet_demo) wrote the
tiny files:

    cd <ComfyUI 0.3.64 source> && PYTHONPATH=<sitecustomize shim>:. OMP_NUM_THREADS=1 <ComfyUI venv>/bin/python \\
        /work/main/scripts/record_comfyui_qwen_instantx.py /work/main/tests/nodes/fixtures/comfyui_qwen_instantx.json.xz \\
        <models dir>

ComfyUI 0.3.64 fixes Qwen-Image's widths to the released model's (24 heads of 128, 3584-wide text states, the VAE's
base width 96); so that its classes load the tiny files, this script gives its model detection (which also sizes the
ControlNet: comfy.controlnet.controlnet_config) the tiny widths read from the files and the VAE its base width, and
changes nothing else: ControlNetLoader, ControlNetApplyAdvanced, ControlNetInpaintingAliMamaApply,
ModelSamplingAuraFlow, EmptySD3LatentImage, KSampler and VAEDecode are ComfyUI's node classes, run in that order.

Cases (CASES): no ControlNet (the baseline the others must differ from); the Union ControlNet on a control image of
another size and aspect than the latent's pixels, and on one of the same size over the first half of the steps only;
the Inpainting ControlNet with a soft mask of the image's size and of a smaller one (ComfyUI scales it); the two
chained. The text states are seeded random tensors (no text
encoder); the control image and mask are seeded random tensors made by `inputs` (the test makes the same; the fixture
keeps their sums). Recorded per case: the sampled latent (float32 base64) and the decoded image as SaveImage's 8-bit
pixels."""

from __future__ import annotations

import base64
import hashlib
import sys

import torch

OUT, MODELS = sys.argv[1:3]
sys.argv[1:] = ["--cpu"]  # ComfyUI reads its command line on import: no CUDA here
import comfy.cli_args  # noqa: E402

comfy.cli_args.args.cpu = True
import comfy.ldm.wan.vae  # noqa: E402
import comfy.model_detection  # noqa: E402
import comfy.utils  # noqa: E402
import comfy_extras.nodes_controlnet as nodes_controlnet  # noqa: E402
import comfy_extras.nodes_model_advanced as model_advanced  # noqa: E402
import comfy_extras.nodes_sd3 as nodes_sd3  # noqa: E402
import folder_paths  # noqa: E402
from comfyui_recording import write_json  # noqa: E402

import nodes  # noqa: E402

TRANSFORMER = "qwen_image_tiny.safetensors"
VAE = "qwen_image_vae_tiny.safetensors"
UNION = "qwen_image_instantx_union_tiny.safetensors"
INPAINT = "qwen_image_instantx_inpainting_tiny.safetensors"
HEAD = 128
WIDTH, HEIGHT = 128, 96
SAMPLING = {"seed": 42, "steps": 3, "cfg": 2.5, "sampler_name": "euler", "scheduler": "simple", "shift": 3.1}
# name -> (ControlNets as (file, strength, start, end), control image (height, width), mask (height, width))
CASES = {
    "no_control": ([], (96, 128), (96, 128)),
    "union_scaled_image": ([(UNION, 0.8, 0.0, 1.0)], (72, 100), (72, 100)),
    "union_first_half": ([(UNION, 1.2, 0.0, 0.5)], (96, 128), (96, 128)),
    "inpainting_mask": ([(INPAINT, 1.0, 0.0, 1.0)], (96, 128), (96, 128)),
    "inpainting_small_mask": ([(INPAINT, 0.9, 0.0, 1.0)], (96, 128), (40, 64)),
    "chained": ([(UNION, 0.5, 0.0, 1.0), (INPAINT, 0.7, 0.0, 1.0)], (96, 128), (96, 128)),
}


def inputs(image_hw: tuple[int, int], mask_hw: tuple[int, int]) -> dict[str, torch.Tensor]:
    """The text states, the control image and the (soft) mask a case uses: one generator, drawn in this order."""
    gen = torch.Generator().manual_seed(4321)
    context = torch.randn(1, 8, 32, generator=gen)
    negative = torch.randn(1, 5, 32, generator=gen)
    image = torch.rand(1, *image_hw, 3, generator=gen)
    mask = torch.rand(1, *mask_hw, generator=gen)
    return {"context": context, "negative": negative, "image": image, "mask": mask}


def b64(t: torch.Tensor) -> dict:
    t = t.detach().to(torch.float32).contiguous()
    return {"shape": list(t.shape), "f32": base64.b64encode(t.numpy().tobytes()).decode()}


def u8(image: torch.Tensor) -> dict:
    """An IMAGE as SaveImage writes its pixels."""
    a = (255.0 * image.cpu().numpy()).clip(0, 255).astype("uint8")
    return {"shape": list(a.shape), "u8": base64.b64encode(a.tobytes()).decode()}


def sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def tiny_sizes() -> None:
    """Give ComfyUI's classes the tiny files' sizes (see the module docstring)."""
    detect = comfy.model_detection.detect_unet_config

    def detect_tiny(state_dict, key_prefix, metadata=None):
        cfg = detect(state_dict, key_prefix, metadata=metadata)
        if cfg is not None and cfg.get("image_model") == "qwen_image":
            cfg["num_attention_heads"] = state_dict[f"{key_prefix}img_in.weight"].shape[0] // HEAD
            cfg["joint_attention_dim"] = state_dict[f"{key_prefix}txt_in.weight"].shape[1]
        return cfg

    comfy.model_detection.detect_unet_config = detect_tiny
    vae_dim = comfy.utils.load_torch_file(f"{MODELS}/vae/{VAE}")["encoder.conv1.weight"].shape[0]
    wan = comfy.ldm.wan.vae.WanVAE
    comfy.ldm.wan.vae.WanVAE = lambda **cfg: wan(**{**cfg, "dim": vae_dim})
    folder_paths.folder_names_and_paths["controlnet"] = ([f"{MODELS}/controlnet"], folder_paths.supported_pt_extensions)


def run_case(unet, vae, controls: list, image_hw: tuple[int, int], mask_hw: tuple[int, int]) -> dict:
    t = inputs(image_hw, mask_hw)
    (model,) = model_advanced.ModelSamplingAuraFlow().patch_aura(unet, SAMPLING["shift"])
    positive, negative = [[t["context"], {}]], [[t["negative"], {}]]
    for name, strength, start, end in controls:
        (cn,) = nodes.ControlNetLoader().load_controlnet(name)
        if name == INPAINT:
            positive, negative = nodes_controlnet.ControlNetInpaintingAliMamaApply().apply_inpaint_controlnet(
                positive, negative, cn, vae, t["image"], t["mask"], strength, start, end
            )
        else:
            positive, negative = nodes.ControlNetApplyAdvanced().apply_controlnet(
                positive, negative, cn, t["image"], strength, start, end, vae=vae
            )
    (latent,) = nodes_sd3.EmptySD3LatentImage().generate(WIDTH, HEIGHT, 1)
    (out,) = nodes.KSampler().sample(
        model,
        SAMPLING["seed"],
        SAMPLING["steps"],
        SAMPLING["cfg"],
        SAMPLING["sampler_name"],
        SAMPLING["scheduler"],
        positive,
        negative,
        latent,
    )
    (image,) = nodes.VAEDecode().decode(vae, out)
    return {
        "controls": [list(c) for c in controls],
        "image_hw": list(image_hw),
        "mask_hw": list(mask_hw),
        "input_sums": {k: float(v.double().sum()) for k, v in t.items()},
        "latent": b64(out["samples"]),
        "image_u8": u8(image),
    }


def main() -> None:
    torch.set_num_threads(1)
    tiny_sizes()
    unet = comfy.sd.load_diffusion_model(f"{MODELS}/diffusion_models/{TRANSFORMER}")
    vae = comfy.sd.VAE(sd=comfy.utils.load_torch_file(f"{MODELS}/vae/{VAE}"))
    with torch.inference_mode():  # as ComfyUI's executor runs nodes
        cases = {name: run_case(unet, vae, *case) for name, case in CASES.items()}
    files = {
        TRANSFORMER: sha256(f"{MODELS}/diffusion_models/{TRANSFORMER}"),
        VAE: sha256(f"{MODELS}/vae/{VAE}"),
        UNION: sha256(f"{MODELS}/controlnet/{UNION}"),
        INPAINT: sha256(f"{MODELS}/controlnet/{INPAINT}"),
    }
    out = {
        "comfyui": "0.3.64 (a125cd84)",
        "files": files,
        "size": [WIDTH, HEIGHT],
        "sampling": SAMPLING,
        "cases": cases,
    }
    write_json(OUT, out)


if __name__ == "__main__":
    main()
