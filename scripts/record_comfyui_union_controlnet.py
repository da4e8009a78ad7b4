"""Record what ComfyUI 0.3.64's union ControlNet gives on the tiny demo file
(controlnet/controlnet-union-sdxl-promax-tiny.safetensors: xinsir's ProMax layout at tiny widths), as a test fixture.

Run inside ComfyUI 0.3.64's own environment (it imports ComfyUI's modules; nothing of ComfyUI is copied here):

    cd <ComfyUI source> && PYTHONPATH=<shim>:. OMP_NUM_THREADS=2 <ComfyUI venv>/bin/python \\
        /work/main/scripts/record_comfyui_union_controlnet.py <models> \\
        /work/main/tests/nodes/fixtures/comfyui_union_controlnet.json.xz

ComfyUI loads diffusers-layout ControlNets only at the widths of the released UNets it lists
(model_detection.unet_config_from_diffusers_unet); for the tiny file that lookup is answered with the tiny file's
UNet config in ComfyUI's terms (model channels 320, one level of one ResBlock, a middle block one transformer
deep, SDXL's 64-wide heads and linear projections, the file's context and ADM widths), passed through ComfyUI's
own convert_config. Everything else is ComfyUI's: load_controlnet_state_dict (key mapping, union part), its
SetUnionControlNetType node, set_cond_hint and get_control with SDXL's discrete EPS sampling (hint resize and crop,
timestep, input scaling, strength), and the cldm ControlNet's forward. The fixture holds the inputs the test gives
our ControlNet (the model input and timestep ComfyUI computed, the text states, pooled output and sizes, the hint
IMAGE) and ComfyUI's residuals for each type tried; and the latent KSampler samples on the union ControlNet's tiny
SDXL UNet (diffusion_models/sdxl-union-base-tiny.safetensors, also from demo-models) with the ControlNet applied
(sample_with_union says what ComfyUI is told of its sizes).
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from comfyui_recording import b64, comfyui_on_cpu, sha256, write_json  # noqa: E402

UNION_FILE = "controlnet/controlnet-union-sdxl-promax-tiny.safetensors"
BASE_FILE = "diffusion_models/sdxl-union-base-tiny.safetensors"
SAMPLING = {"size": [64, 48], "seed": 5, "steps": 3, "cfg": 2.0}  # width, height; euler, normal
APPLY = (0.9, 0.0, 1.0)  # strength, start and end percent
TYPES = ("auto", "depth", "repaint")
STRENGTH = 0.8
SIZES = [96.0, 128.0, 8.0, 0.0, 96.0, 128.0]  # height, width, crop top, crop left, target height, target width


def seeded(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def tiny_unet_config(sd: dict) -> dict:
    """The tiny file's UNet config in ComfyUI's terms (what its list of released configs would hold)."""
    return {
        "use_checkpoint": False,
        "image_size": 32,
        "out_channels": 4,
        "use_spatial_transformer": True,
        "legacy": False,
        "num_classes": "sequential",
        "adm_in_channels": sd["add_embedding.linear_1.weight"].shape[1],
        "dtype": None,
        "in_channels": sd["conv_in.weight"].shape[1],
        "model_channels": sd["conv_in.weight"].shape[0],
        "num_res_blocks": [1],
        "transformer_depth": [0],
        "channel_mult": [1],
        "transformer_depth_middle": 1,
        "use_linear_in_transformer": True,
        "context_dim": sd["mid_block.attentions.0.transformer_blocks.0.attn2.to_k.weight"].shape[1],
        "num_head_channels": 64,
        "transformer_depth_output": [0, 0],
        "use_temporal_attention": False,
        "use_temporal_resblock": False,
    }


def sample_with_union(models: str, control_path: str, config: dict, hint: torch.Tensor) -> dict:
    """KSampler on the union ControlNet's UNet (sdxl-union-base-tiny) with the ControlNet applied by
    ControlNetApplyAdvanced after SetUnionControlNetType, for "auto" and "depth"; conditioning given as tensors (no
    text encoder). ComfyUI tells SDXL UNets by the released widths only: its SDXL model config is told the tiny one's
    (model channels 320, text 80 and ADM 1568 wide); the model, its ADM, the ControlNet and the sampler are ComfyUI's."""
    import comfy.controlnet
    import comfy.sd
    import comfy.supported_models
    from comfy_extras.nodes_controlnet import SetUnionControlNetType

    import nodes

    comfy.supported_models.SDXL.unet_config = {
        "model_channels": config["model_channels"],
        "context_dim": config["context_dim"],
        "adm_in_channels": config["adm_in_channels"],
        "use_linear_in_transformer": True,
        "use_temporal_attention": False,
    }
    model = comfy.sd.load_diffusion_model(os.path.join(models, BASE_FILE))
    control_net = comfy.controlnet.load_controlnet(control_path)
    g = torch.Generator().manual_seed(60)
    pooled = config["adm_in_channels"] - 6 * 256
    positive = [
        [torch.randn(1, 6, config["context_dim"], generator=g), {"pooled_output": torch.randn(1, pooled, generator=g)}]
    ]
    negative = [
        [torch.randn(1, 4, config["context_dim"], generator=g), {"pooled_output": torch.randn(1, pooled, generator=g)}]
    ]
    out = {"file": BASE_FILE, "sha256": sha256(os.path.join(models, BASE_FILE)), "settings": SAMPLING, "latents": {}}
    for name in ("auto", "depth"):
        (typed,) = SetUnionControlNetType().set_controlnet_type(control_net, name)
        pos, neg = nodes.ControlNetApplyAdvanced().apply_controlnet(positive, negative, typed, hint, *APPLY)
        (latent,) = nodes.EmptyLatentImage().generate(*SAMPLING["size"], 1)
        (samples,) = nodes.KSampler().sample(
            model, SAMPLING["seed"], SAMPLING["steps"], SAMPLING["cfg"], "euler", "normal", pos, neg, latent, 1.0
        )
        out["latents"][name] = b64(samples["samples"])
    out["conditioning"] = {
        side: {"context": b64(c[0][0]), "pooled": b64(c[0][1]["pooled_output"])}
        for side, c in (("positive", positive), ("negative", negative))
    }
    return out


def main(models: str, out_path: str) -> None:
    comfyui_on_cpu()
    import comfy.controlnet
    import comfy.model_detection
    import comfy.model_sampling
    import comfy.utils
    from comfy.ldm.modules.diffusionmodules.openaimodel import Timestep
    from comfy_extras.nodes_controlnet import SetUnionControlNetType

    torch.set_num_threads(1)
    path = os.path.join(models, UNION_FILE)
    sd = comfy.utils.load_torch_file(path)
    config = tiny_unet_config(sd)
    comfy.model_detection.unet_config_from_diffusers_unet = lambda state_dict, dtype=None: (
        comfy.model_detection.convert_config(dict(config))
    )
    control_net = comfy.controlnet.load_controlnet_state_dict(sd)

    class SDXLSampling(comfy.model_sampling.ModelSamplingDiscrete, comfy.model_sampling.EPS):
        pass

    sampling = SDXLSampling()
    x = seeded(50, 2, 4, 4, 4)
    sigma = torch.tensor([4.5, 4.5])
    context = seeded(51, 2, 5, config["context_dim"])
    pooled = seeded(52, 2, config["adm_in_channels"] - 6 * 256)
    hint = torch.rand(1, 40, 72, 3, generator=torch.Generator().manual_seed(53))  # wider than the latent: cropped
    embed = Timestep(256)
    sizes = torch.cat([embed(torch.tensor([v])) for v in SIZES]).flatten()
    y = torch.cat([pooled, sizes.unsqueeze(0).repeat(2, 1)], dim=1)
    cond = {"c_crossattn": context, "y": y}

    residuals = {}
    for name in TYPES:
        (typed,) = SetUnionControlNetType().set_controlnet_type(control_net, name)
        run = typed.copy().set_cond_hint(hint.movedim(-1, 1), STRENGTH, (0.0, 1.0))
        run.model_sampling_current = sampling
        out = run.get_control(x, sigma, cond, 1, {})
        residuals[name] = {"down": [b64(t) for t in out["output"]], "mid": b64(out["middle"][0])}
        run.cleanup()

    fixture_sampling = sample_with_union(models, path, config, hint)
    fixture = {
        "sampling": fixture_sampling,
        "file": UNION_FILE,
        "sha256": sha256(path),
        "strength": STRENGTH,
        "inputs": {
            "x": b64(sampling.calculate_input(sigma, x)),
            "timestep": b64(sampling.timestep(sigma)),
            "context": b64(context),
            "pooled": b64(pooled),
            "time_ids": SIZES,
            "hint": b64(hint),
        },
        "residuals": residuals,
    }
    write_json(out_path, fixture)
    print("wrote", out_path, {k: len(v["down"]) for k, v in residuals.items()})


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
