"""Record what ComfyUI samples with qwen-image-tiny steered by the tiny Qwen-Image-2512 Fun ControlNet Union, as the
fixture of tests/nodes/test_qwen_fun_controlnet.py (tests/nodes/fixtures/comfyui_qwen_fun_controlnet.json).

The Fun ControlNet is newer than any ComfyUI that runs here: its model class is in comfy/ldm/qwen_image/controlnet.py
of the newest source (Comfy-Org/ComfyUI 03b1ca67). That file (its Fun classes, unchanged) is saved at development
time outside the repository and given as FUN_SOURCE; it runs inside ComfyUI 0.3.64, whose Qwen-Image model it reads
(nothing of ComfyUI is copied here):

    cd <ComfyUI 0.3.64 source> && PYTHONPATH=<sitecustomize shim>:/work/main/scripts:. OMP_NUM_THREADS=1 \\
        <ComfyUI venv>/bin/python /work/main/scripts/record_comfyui_qwen_fun_controlnet.py \\
        /work/main/tests/nodes/fixtures/comfyui_qwen_fun_controlnet.json <models dir> <FUN_SOURCE>

What this script adds around ComfyUI's classes, from the newest comfy/controlnet.py (load_controlnet_qwen_fun and
QwenFunControlNet, read at 03b1ca67):
- the model is built with the file's widths (control_img_in, the first block's norm_q and to_q), five control blocks,
  injection after main blocks 0, 12, 24, 36, 48 of 60, in float32 (ComfyUI's dtype for it on this CPU), and wrapped
  in 0.3.64's comfy.controlnet.ControlNet with compression ratio 1, Wan 2.1's latent format, no extra conds and no
  concat mask;
- as QwenFunControlNet does, each control call runs at the square root of the strength, and the sampled model's
  diffusion model is handed to it as `base_model`;
- one glue for 0.3.64: the newest Fun file reads the base model's rotary embedding in the newest layout
  (`pe_embedder(ids)` as is); 0.3.64's attention reads `pe_embedder(ids).squeeze(1).unsqueeze(2)` (what its own
  forward passes), so the base model is handed through a view whose pe_embedder returns that.
Sizes for the tiny files are given to 0.3.64's model detection and Wan VAE as in record_comfyui_qwen_instantx.py.
ModelSamplingAuraFlow, ControlNetApplyAdvanced, EmptySD3LatentImage, KSampler and VAEDecode are ComfyUI's nodes.

Cases (CASES): no ControlNet (the baseline), the Fun ControlNet at strength 1 on a control image of another size than
the latent's pixels, and at strength 0.64 over the first half of the steps. Inputs are seeded tensors (`inputs`)."""

from __future__ import annotations

import importlib.util
import json
import math
import sys

import torch
from comfyui_recording import MAX_RECORDED_VALUES, b64, comfyui_on_cpu, png_rgb, sha256

OUT, MODELS, FUN_SOURCE = sys.argv[1:4]
comfyui_on_cpu()

import comfy.controlnet  # noqa: E402
import comfy.latent_formats  # noqa: E402
import comfy.ldm.qwen_image.model  # noqa: E402
import comfy.ldm.wan.vae  # noqa: E402
import comfy.model_detection  # noqa: E402
import comfy.model_management  # noqa: E402
import comfy.ops  # noqa: E402
import comfy.sd  # noqa: E402
import comfy.utils  # noqa: E402
import comfy_extras.nodes_model_advanced as model_advanced  # noqa: E402
import comfy_extras.nodes_sd3 as nodes_sd3  # noqa: E402

import nodes  # noqa: E402

TRANSFORMER = "qwen_image_tiny.safetensors"
VAE = "qwen_image_vae_tiny.safetensors"
FUN = "qwen_image_2512_fun_controlnet_union_tiny.safetensors"
HEAD = 128
WIDTH, HEIGHT = 128, 96
SAMPLING = {"seed": 42, "steps": 3, "cfg": 2.5, "sampler_name": "euler", "scheduler": "simple", "shift": 3.1}
# name -> (ControlNets as (strength, start, end), control image (height, width))
CASES = {
    "no_control": ([], (96, 128)),
    "fun_scaled_image": ([(1.0, 0.0, 1.0)], (72, 100)),
    "fun_first_half": ([(0.64, 0.0, 0.5)], (96, 128)),
}


def inputs(image_hw: tuple[int, int]) -> dict[str, torch.Tensor]:
    """The text states and the control image a case uses: one generator, drawn in this order."""
    gen = torch.Generator().manual_seed(4321)
    context = torch.randn(1, 8, 32, generator=gen)
    negative = torch.randn(1, 5, 32, generator=gen)
    image = torch.rand(1, *image_hw, 3, generator=gen)
    return {"context": context, "negative": negative, "image": image}


def fun_module():
    spec = importlib.util.spec_from_file_location("comfy.ldm.qwen_image.controlnet_fun", FUN_SOURCE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tiny_sizes() -> None:
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


class RotaryIn064Layout(torch.nn.Module):
    """The base model as the Fun file reads it, its rotary embedding in the layout 0.3.64's attention reads."""

    def __init__(self, base: torch.nn.Module) -> None:
        super().__init__()
        self.base = base

    def __getattr__(self, name: str):
        if name == "base":
            return super().__getattr__(name)
        if name == "pe_embedder":
            return lambda ids: self.base.pe_embedder(ids).squeeze(1).unsqueeze(2)
        return getattr(self.base, name)


class FunControl(comfy.controlnet.ControlNet):
    """0.3.64's ControlNet with what the newest QwenFunControlNet adds (see the module docstring)."""

    def get_control(self, x_noisy, t, cond, batched_number, *args):
        strength = self.strength
        self.strength = math.sqrt(max(strength, 0.0))
        try:
            return super().get_control(x_noisy, t, cond, batched_number, *args)
        finally:
            self.strength = strength

    def pre_run(self, model, percent_to_timestep_function):
        super().pre_run(model, percent_to_timestep_function)
        self.set_extra_arg("base_model", RotaryIn064Layout(model.diffusion_model))

    def cleanup(self):
        self.extra_args.pop("base_model", None)
        super().cleanup()

    def copy(self):
        c = FunControl(None, global_average_pooling=self.global_average_pooling, load_device=self.load_device)
        c.control_model = self.control_model
        c.control_model_wrapped = self.control_model_wrapped
        self.copy_to(c)
        return c


def load_fun(path: str) -> FunControl:
    sd = comfy.utils.load_torch_file(path)
    head_dim = sd["control_blocks.0.attn.norm_q.weight"].shape[0]
    model = fun_module().QwenImageFunControlNetModel(
        control_in_features=sd["control_img_in.weight"].shape[1],
        inner_dim=sd["control_img_in.weight"].shape[0],
        num_attention_heads=max(1, sd["control_blocks.0.attn.to_q.weight"].shape[0] // head_dim),
        attention_head_dim=head_dim,
        operations=comfy.ops.disable_weight_init,
        dtype=torch.float32,
    )
    missing, unexpected = model.load_state_dict(sd, strict=False)
    assert not missing and not unexpected, (missing, unexpected)
    return FunControl(
        model,
        compression_ratio=1,
        latent_format=comfy.latent_formats.Wan21(),
        load_device=comfy.model_management.get_torch_device(),
        extra_conds=[],
    )


def run_case(unet, vae, controls: list, image_hw: tuple[int, int]) -> dict:
    t = inputs(image_hw)
    (model,) = model_advanced.ModelSamplingAuraFlow().patch_aura(unet, SAMPLING["shift"])
    positive, negative = [[t["context"], {}]], [[t["negative"], {}]]
    for strength, start, end in controls:
        cn = load_fun(f"{MODELS}/controlnet/{FUN}")
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
        "input_sums": {k: float(v.double().sum()) for k, v in t.items()},
        "latent": b64(out["samples"], MAX_RECORDED_VALUES),
        "image": png_rgb(image, MAX_RECORDED_VALUES),
    }


def main() -> None:
    torch.set_num_threads(1)
    tiny_sizes()
    unet = comfy.sd.load_diffusion_model(f"{MODELS}/diffusion_models/{TRANSFORMER}")
    vae = comfy.sd.VAE(sd=comfy.utils.load_torch_file(f"{MODELS}/vae/{VAE}"))
    with torch.inference_mode():  # as ComfyUI's executor runs nodes
        cases = {name: run_case(unet, vae, *case) for name, case in CASES.items()}
    out = {
        "comfyui": "0.3.64 (a125cd84) with comfy/ldm/qwen_image/controlnet.py's Fun classes of 03b1ca67",
        "files": {
            TRANSFORMER: sha256(f"{MODELS}/diffusion_models/{TRANSFORMER}"),
            VAE: sha256(f"{MODELS}/vae/{VAE}"),
            FUN: sha256(f"{MODELS}/controlnet/{FUN}"),
        },
        "size": [WIDTH, HEIGHT],
        "sampling": SAMPLING,
        "cases": cases,
    }
    with open(OUT, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
