"""Record what ComfyUI 0.3.64 computes for Lotus-D depth on the tiny demo file, as the fixture
tests/nodes/test_lotus.py compares with, and the conditioning LotusConditioning returns, as our node's data file.

Run inside ComfyUI's own environment (it imports ComfyUI's modules and runs their code; nothing of ComfyUI is copied
here), after `comfy-cluster demo-models` wrote the tiny file:

    cd <ComfyUI source> && PYTHONPATH=<site>:. OMP_NUM_THREADS=1 <ComfyUI venv>/bin/python \\
        /work/main/scripts/record_comfyui_lotus.py /work/main/tests/nodes/fixtures/comfyui_lotus.json \\
        /work/main/nodes/models/data/lotus_conditioning.safetensors <workspace>

The conditioning: ComfyUI's LotusConditioning holds Lotus' frozen text encoder's output for its empty prompt as
numbers (two 1024-wide tokens); it is written as a safetensors file, `conditioning` [1, 2, 1024] float32.

The model: ComfyUI's UNETLoader path (comfy.sd.load_diffusion_model) on the tiny file, which is in diffusers' names
as the published one. ComfyUI matches a diffusers UNet against the released configs only (its LotusD entry: 320
channels, [1, 2, 4, 4], 8 heads), so this script gives it the tiny file's widths (32 channels, [1, 1, 2, 2]) and
changes nothing else: the key conversion, model class (model_base.Lotus, its task embedding), IMG_TO_IMG sampling,
nodes and samplers are ComfyUI's.

Recorded: the template's sampling chain (BasicScheduler normal, SetFirstSigma, KSamplerSelect euler, DisableNoise,
BasicGuider on LotusConditioning, SamplerCustomAdvanced) on seeded latents, at the templates' first sigmas (999 in
image_lotus_depth_v1_1, 10000 in flux_depth_lora_example), one step and two. Tensors as float32 (base64).
"""

from __future__ import annotations

import json
import sys

import torch
from comfyui_recording import b64, comfyui_on_cpu

OUT, DATA_OUT, WORKSPACE = sys.argv[1:4]
comfyui_on_cpu()
import comfy.model_detection  # noqa: E402
import comfy.sd  # noqa: E402
import comfy.supported_models  # noqa: E402
from comfy_extras import nodes_custom_sampler as cs  # noqa: E402
from comfy_extras import nodes_lotus  # noqa: E402

COMFYUI = "0.3.64 (a125cd84b054a57729b5eecab930ca9408719832)"
FILE = f"{WORKSPACE}/models/diffusion_models/lotus-depth-d-v1-1_tiny.safetensors"
CHANNELS, MULT = 32, [1, 1, 2, 2]
CASES = [  # (seed, latent shape, first sigma, steps)
    (1, (1, 4, 8, 8), 999.0000000000002, 1),
    (2, (2, 4, 8, 12), 999.0000000000002, 1),
    (3, (1, 4, 8, 8), 10000.0, 1),
    (4, (1, 4, 8, 8), 999.0000000000002, 2),
]


def tiny_widths() -> None:
    """ComfyUI's LotusD diffusers config at the tiny file's widths (see the module docstring)."""
    detect = comfy.model_detection.unet_config_from_diffusers_unet

    def detect_tiny(state_dict, dtype=None):
        if "class_embedding.linear_1.weight" not in state_dict:
            return detect(state_dict, dtype)
        return {
            "use_checkpoint": False,
            "image_size": 32,
            "out_channels": 4,
            "use_spatial_transformer": True,
            "legacy": False,
            "adm_in_channels": state_dict["class_embedding.linear_1.weight"].shape[1],
            "dtype": dtype,
            "in_channels": 4,
            "model_channels": CHANNELS,
            "num_res_blocks": [2, 2, 2, 2],
            "transformer_depth": [1, 1, 1, 1, 1, 1, 0, 0],
            "channel_mult": MULT,
            "transformer_depth_middle": 1,
            "use_linear_in_transformer": True,
            "context_dim": state_dict["down_blocks.0.attentions.0.transformer_blocks.0.attn2.to_k.weight"].shape[1],
            "num_heads": 8,
            "transformer_depth_output": [1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0],
            "use_temporal_attention": False,
            "use_temporal_resblock": False,
        }

    comfy.model_detection.unet_config_from_diffusers_unet = detect_tiny
    lotus = comfy.supported_models.LotusD
    lotus.unet_config = {**lotus.unet_config, "model_channels": CHANNELS}


def call(cls, *args):
    node = cls()
    return getattr(node, cls.FUNCTION)(*args)


def main() -> None:
    torch.set_num_threads(1)
    cond = nodes_lotus.LotusConditioning.execute().result[0]
    from safetensors.torch import save_file

    save_file({"conditioning": cond[0][0].float().contiguous()}, DATA_OUT, metadata={"format": "pt"})
    tiny_widths()
    model = comfy.sd.load_diffusion_model(FILE)
    (sampler,) = call(cs.KSamplerSelect, "euler")
    (guider,) = call(cs.BasicGuider, model, cond)
    (noise,) = call(cs.DisableNoise)
    cases = []
    for seed, shape, sigma, steps in CASES:
        latent = torch.randn(shape, generator=torch.Generator().manual_seed(seed))
        (sigmas,) = call(cs.BasicScheduler, model, "normal", steps, 1.0)
        (sigmas,) = call(cs.SetFirstSigma, sigmas, sigma)
        out, _ = call(cs.SamplerCustomAdvanced, noise, guider, sampler, sigmas, {"samples": latent})
        cases.append(
            {
                "latent": b64(latent),
                "sigma": sigma,
                "steps": steps,
                "sigmas": sigmas.tolist(),
                "out": b64(out["samples"]),
            }
        )
    fixture = {
        "note": f"Recorded by scripts/record_comfyui_lotus.py with ComfyUI {COMFYUI} on the CPU, one thread.",
        "cases": cases,
    }
    with open(OUT, "w") as f:
        json.dump(fixture, f, indent=1)


if __name__ == "__main__":
    main()
