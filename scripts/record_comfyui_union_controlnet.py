"""Record what ComfyUI 0.3.64's union ControlNet gives on the tiny demo file
(controlnet/controlnet-union-sdxl-promax-tiny.safetensors: xinsir's ProMax layout at tiny widths), as a test fixture.

Run inside ComfyUI 0.3.64's own environment (it imports ComfyUI's modules; nothing of ComfyUI is copied here):

    cd <ComfyUI source> && PYTHONPATH=<shim>:. OMP_NUM_THREADS=2 <ComfyUI venv>/bin/python \\
        /work/main/scripts/record_comfyui_union_controlnet.py <models> \\
        /work/main/tests/nodes/fixtures/comfyui_union_controlnet.json

ComfyUI loads diffusers-layout ControlNets only at the widths of the released UNets it lists
(model_detection.unet_config_from_diffusers_unet); for the tiny file that lookup is answered with the tiny file's
UNet config in ComfyUI's terms (model channels 320, one level of one ResBlock, a middle block one transformer
deep, SDXL's 64-wide heads and linear projections, the file's context and ADM widths), passed through ComfyUI's
own convert_config. Everything else is ComfyUI's: load_controlnet_state_dict (key mapping, union part), its
SetUnionControlNetType node, set_cond_hint and get_control with SDXL's discrete EPS sampling (hint resize and crop,
timestep, input scaling, strength), and the cldm ControlNet's forward. The fixture holds the inputs the test gives
our ControlNet (the model input and timestep ComfyUI computed, the text states, pooled output and sizes, the hint
IMAGE) and ComfyUI's residuals for each type tried.
"""

from __future__ import annotations

import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from comfyui_recording import b64, comfyui_on_cpu, sha256  # noqa: E402

UNION_FILE = "controlnet/controlnet-union-sdxl-promax-tiny.safetensors"
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

    fixture = {
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
    with open(out_path, "w") as f:
        json.dump(fixture, f)
    print("wrote", out_path, {k: len(v["down"]) for k, v in residuals.items()})


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
