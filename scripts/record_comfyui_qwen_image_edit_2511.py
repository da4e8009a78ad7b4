"""Record what upstream ComfyUI 0.10.0 (commit 79cdbc81 of hiddenswitch/ComfyUI; 0.3.64 has no Qwen-Image-Edit
2511) computes for the `index_timestep_zero` reference method on the tiny files, as the fixture
tests/models/fixtures/comfyui_qwen_image_edit_2511.json.

Run inside that ComfyUI's own environment (nothing of ComfyUI is copied here), after `comfy-cluster demo-models`:

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<site>:. OMP_NUM_THREADS=1 <venv>/bin/python \\
        /work/main/scripts/record_comfyui_qwen_image_edit_2511.py <fixture> <workspace>

ComfyUI fixes Qwen-Image's 24 heads and 3584-wide text; this script gives its model detection the tiny widths
read from the files' shapes and changes nothing else. Recorded: the default reference method ComfyUI's detection
gives each file (the 2511 file's `__index_timestep_zero__` marker), and the transformer's raw output on seeded
inputs with reference latents: the 2511 file with its default, with `index` asked for, with two references of
different sizes and with none; the 2509-layout file with `index_timestep_zero` asked for (as
FluxKontextMultiReferenceLatentMethod sets it); and that node's conditioning value.
"""
from __future__ import annotations

import base64
import hashlib
import json
import sys

import torch

OUT, WORKSPACE = sys.argv[1:3]
sys.argv[1:] = ["--cpu"]
import comfy.cli_args  # noqa: E402

comfy.cli_args.args.cpu = True
import comfy.model_detection  # noqa: E402
import comfy.sd  # noqa: E402

COMMIT = "79cdbc81"
FILES = {"2511": "diffusion_models/qwen_image_edit_2511_tiny.safetensors",
         "2509": "diffusion_models/qwen_image_tiny.safetensors"}
HEAD = 128
# (file, seed, latent shape, reference shapes, timestep, method or None for the file's default)
CASES = {"2511_default": ("2511", 1, [1, 16, 1, 8, 8], [[1, 16, 1, 6, 10]], 0.7, None),
         "2511_two_references": ("2511", 2, [1, 16, 1, 6, 8], [[1, 16, 1, 8, 8], [1, 16, 1, 4, 6]], 0.4, None),
         "2511_index": ("2511", 1, [1, 16, 1, 8, 8], [[1, 16, 1, 6, 10]], 0.7, "index"),
         "2511_no_reference": ("2511", 3, [1, 16, 1, 6, 6], [], 0.9, None),
         "2509_timestep_zero": ("2509", 4, [2, 16, 1, 6, 8], [[2, 16, 1, 6, 8]], 0.5, "index_timestep_zero")}
TOKENS = 7


def b64(t: torch.Tensor) -> dict:
    t = t.detach().to(torch.float32).contiguous()
    return {"shape": list(t.shape), "f32": base64.b64encode(t.numpy().tobytes()).decode()}


def sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def tiny_widths() -> None:
    detect = comfy.model_detection.detect_unet_config

    def detect_tiny(state_dict, key_prefix, metadata=None):
        cfg = detect(state_dict, key_prefix, metadata=metadata)
        if cfg is not None and cfg.get("image_model") == "qwen_image":
            cfg["num_attention_heads"] = state_dict[f"{key_prefix}img_in.weight"].shape[0] // HEAD
            cfg["joint_attention_dim"] = state_dict[f"{key_prefix}txt_in.weight"].shape[1]
        return cfg
    comfy.model_detection.detect_unet_config = detect_tiny


def inputs(seed: int, shape: list[int], refs: list[list[int]], width: int):
    """(x, context, references) drawn from one generator in this order (the test draws them alike)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g)
    context = torch.randn(shape[0], TOKENS, width, generator=g)
    return x, context, [torch.randn(r, generator=g) for r in refs]


def main() -> None:
    torch.set_num_threads(1)
    tiny_widths()
    nets = {k: comfy.sd.load_diffusion_model(f"{WORKSPACE}/models/{v}").model.diffusion_model
            for k, v in FILES.items()}
    out = {"comfyui_commit": COMMIT, "recorded_by": "scripts/record_comfyui_qwen_image_edit_2511.py",
           "files": {k: {"path": v, "sha256": sha256(f"{WORKSPACE}/models/{v}")} for k, v in FILES.items()},
           "default_ref_method": {k: net.default_ref_method for k, net in nets.items()}, "cases": {}}
    for name, (file, seed, shape, refs, t, method) in CASES.items():
        net = nets[file]
        x, context, references = inputs(seed, shape, refs, net.txt_in.weight.shape[1])
        kwargs = {"ref_latents": references or None}
        if method is not None:
            kwargs["ref_latents_method"] = method
        with torch.no_grad():
            result = net(x, torch.tensor([t] * shape[0]), context, **kwargs)
        out["cases"][name] = {"file": file, "seed": seed, "shape": shape, "refs": refs, "timestep": t,
                              "method": method, "out": b64(result)}
    from comfy_extras.nodes_flux import FluxKontextMultiReferenceLatentMethod
    cond = FluxKontextMultiReferenceLatentMethod.execute([[torch.zeros(1, 1, 1), {}]], "index_timestep_zero")
    out["method_node"] = cond.result[0][0][1]
    with open(OUT, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
