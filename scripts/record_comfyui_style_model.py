"""Record ComfyUI's StyleModelApply for the demo style model (and a tiny Flux Redux), as a test fixture.

Run inside ComfyUI's own environment (it imports ComfyUI's modules; nothing of ComfyUI is copied here):

    cd <ComfyUI source> && PYTHONPATH=<site>:. OMP_NUM_THREADS=2 <ComfyUI venv>/bin/python \\
        /work/main/scripts/record_comfyui_style_model.py <models> /work/main/tests/nodes/fixtures/comfyui_style_model.json

<models> is a models folder the demo-models command wrote. ComfyUI's load_style_model builds the released
models' sizes, so its own classes are built here with the demo's sizes (StyleAdapter: width 32, text width
32, 8 heads, 3 blocks, 8 tokens; ReduxImageEncoder 32 -> 16 with the seeded weights of `redux_weights()`)
and fed the demo CLIP vision model's output (ComfyUI's ClipVisionModel, as in record_comfyui_clip_vision.py)
for the fixed image `image()`. Then ComfyUI's StyleModelApply node runs on the fixed conditioning
`conditioning()` for each case; the fixture holds every output entry's tensor (every 8th value, shape,
mean) and attention mask (float16 SHA-256, shape), and the keys of the entry.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from record_comfyui_clip_vision import TINY_CONFIG  # noqa: E402

CASES = [
    ("multiply_1", "t2i", 1.0, "multiply"),
    ("multiply_0_35", "t2i", 0.35, "multiply"),
    ("attn_bias_1", "t2i", 1.0, "attn_bias"),
    ("attn_bias_0_3", "t2i", 0.3, "attn_bias"),
    ("attn_bias_0", "t2i", 0.0, "attn_bias"),
    ("attn_bias_2_5_two_entries", "t2i", 2.5, "attn_bias"),
    ("redux_multiply_0_8", "redux", 0.8, "multiply"),
]


def image() -> torch.Tensor:
    return torch.rand(1, 90, 120, 3, generator=torch.Generator().manual_seed(99))


def conditioning(case: str, width: int) -> list:
    gen = torch.Generator().manual_seed(7)
    first = [torch.randn(1, 77, width, generator=gen), {"pooled_output": torch.randn(1, width, generator=gen)}]
    if case.endswith("two_entries"):
        return [first, [torch.randn(1, 154, width, generator=gen), {}]]
    return [first]


def redux_weights() -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(5)
    return {
        "redux_up.weight": torch.randn(48, 32, generator=gen) * 0.2,
        "redux_up.bias": torch.randn(48, generator=gen) * 0.1,
        "redux_down.weight": torch.randn(16, 48, generator=gen) * 0.2,
        "redux_down.bias": torch.randn(16, generator=gen) * 0.1,
    }


def describe(conditioning: list) -> list:
    out = []
    for t, keys in conditioning:
        entry = {
            "shape": list(t.shape),
            "mean": float(t.float().mean()),
            "every_8th": t.float().flatten()[::8].tolist(),
            "keys": sorted(keys),
        }
        mask = keys.get("attention_mask")
        if mask is not None:
            entry["attention_mask"] = {
                "shape": list(mask.shape),
                "dtype": str(mask.dtype),
                "sha256": hashlib.sha256(mask.to(torch.float16).contiguous().numpy().tobytes()).hexdigest(),
            }
            entry["attention_mask_img_shape"] = list(keys["attention_mask_img_shape"])
        out.append(entry)
    return out


def main(models: str, out_path: str) -> None:
    from comfy.cli_args import args

    args.cpu = True  # as the server runs with --cpu; must be set before model_management is imported
    import comfy.clip_vision
    import comfy.ldm.flux.redux
    import comfy.sd
    import comfy.t2i_adapter.adapter
    import comfy.utils

    import nodes

    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(TINY_CONFIG, f)
    vision = comfy.clip_vision.ClipVisionModel(f.name)
    vision.load_sd(comfy.utils.load_torch_file(os.path.join(models, "clip_vision", "clip-vision-tiny.safetensors")))
    encoded = vision.encode_image(image(), crop=True)
    adapter = comfy.t2i_adapter.adapter.StyleAdapter(width=32, context_dim=32, num_head=8, n_layes=3, num_token=8)
    style_path = os.path.join(models, "style_models", "sd1-tiny-style.safetensors")
    adapter.load_state_dict(comfy.utils.load_torch_file(style_path, safe_load=True))
    redux = comfy.ldm.flux.redux.ReduxImageEncoder(redux_dim=32, txt_in_features=16)
    redux.load_state_dict(redux_weights())
    models_by_kind = {"t2i": (comfy.sd.StyleModel(adapter), 32), "redux": (comfy.sd.StyleModel(redux), 16)}
    cases = {}
    for name, kind, strength, strength_type in CASES:
        model, width = models_by_kind[kind]
        (out,) = nodes.StyleModelApply().apply_stylemodel(
            conditioning(name, width), model, encoded, strength, strength_type
        )
        cases[name] = describe(out)
    record = {
        "comfyui_commit": "a125cd84b054a57729b5eecab930ca9408719832",
        "recorded_by": "scripts/record_comfyui_style_model.py (ComfyUI's StyleAdapter / ReduxImageEncoder "
        "and StyleModelApply node, CPU)",
        "style_model_sha256": hashlib.sha256(open(style_path, "rb").read()).hexdigest(),
        "cases": cases,
    }
    with open(out_path, "w") as f:
        json.dump(record, f, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
