"""Record ComfyUI's area and mask conditioning on fixed tensors, as a test fixture.

Run inside ComfyUI's own environment (it imports ComfyUI's modules; nothing of ComfyUI is copied here):

    cd <ComfyUI source> && PYTHONPATH=<site>:. OMP_NUM_THREADS=2 <ComfyUI venv>/bin/python \
        /work/main/scripts/record_comfyui_area_conditioning.py /work/main/tests/nodes/fixtures/comfyui_area_conditioning.json

For each scenario it builds the cond dicts ComfyUI's sampler sees, runs ComfyUI's own steps
(resolve_areas_and_cond_masks_multidim, create_cond_with_same_area_if_none, calc_cond_batch) with a toy
model function (denoised = 0.75 x + mean(context) + 0.1 sigma + position / 100 over the crop it is given),
and stores the inputs as float32 bytes (base64) and the two sides' blended predictions by the SHA-256 of
their float32 bytes, so the test compares bit for bit. It also records what the four area/mask nodes write
into a conditioning entry.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import uuid

import torch
from comfyui_recording import b64, comfyui_on_cpu

comfyui_on_cpu(sys.argv[1])
import comfy.conds  # noqa: E402
import comfy.samplers  # noqa: E402

import nodes  # noqa: E402


def digest(t: torch.Tensor) -> dict:
    """An output by its float32 bytes' SHA-256 (exact), with a sum and a corner to diagnose a mismatch."""
    t = t.detach().to(torch.float32).contiguous()
    return {
        "shape": list(t.shape),
        "sha256": hashlib.sha256(t.numpy().tobytes()).hexdigest(),
        "sum": float(t.double().sum()),
        "corner": t.reshape(-1)[:4].tolist(),
    }


class Patcher:
    def prepare_state(self, timestep):
        pass

    def apply_hooks(self, hooks=None):
        return {}


class ToyModel:
    current_patcher = Patcher()

    def memory_required(self, input_shape, cond_shapes=None):
        return 0

    def apply_model(self, x, t, c_crossattn=None, transformer_options=None, **kwargs):
        h, w = x.shape[2:]
        grid = torch.arange(h * w, dtype=torch.float32).reshape(1, 1, h, w) / 100.0
        return x * 0.75 + c_crossattn.mean(dim=(1, 2)).reshape(-1, 1, 1, 1) + 0.1 * t.reshape(-1, 1, 1, 1) + grid


def run_case(
    x,
    sigma,
    sides: dict[str, list[tuple[str, dict]]],
    contexts: dict[str, torch.Tensor],
    masks: dict[str, torch.Tensor],
) -> list:
    """Entries name their context and mask; a 2-D mask gets its batch dimension, as ConditioningSetMask does."""
    conds = {}
    for name, entries in sides.items():
        conds[name] = []
        for ctx, opts in entries:
            opts = dict(opts)
            if "mask" in opts:
                m = masks[opts["mask"]]
                opts["mask"] = m.unsqueeze(0) if m.ndim == 2 else m
            conds[name].append(
                {**opts, "model_conds": {"c_crossattn": comfy.conds.CONDCrossAttn(contexts[ctx])}, "uuid": uuid.uuid4()}
            )
    for k in conds:
        comfy.samplers.resolve_areas_and_cond_masks_multidim(conds[k], x.shape[2:], "cpu")
    for k in conds:
        for c in conds[k]:
            for kk in conds:
                if k != kk:
                    comfy.samplers.create_cond_with_same_area_if_none(conds[kk], c)
    return comfy.samplers.calc_cond_batch(ToyModel(), [conds[k] for k in sides], x, sigma, {})


def main(out_path: str) -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 4, 40, 48)
    sigma = torch.tensor([1.5, 1.5])
    contexts = {name: torch.randn(1, 3, 8) for name in ("A", "B", "C", "N", "M")}
    blob = torch.zeros(1, 80, 96)
    blob[:, 20:52, 40:90] = 1.0
    blob[:, 30:40, 60:70] = 0.5
    masks = {
        "blob": blob,
        "soft": torch.rand(1, 80, 96),
        "latent2": torch.rand(2, 40, 48),
        "empty": torch.zeros(80, 96),
    }

    def area(h, w, y, xx, strength=1.0):
        return {"area": (h, w, y, xx), "strength": strength, "set_area_to_bounds": False}

    def mask(name, strength=1.0, bounds=False):
        return {"mask": name, "set_area_to_bounds": bounds, "mask_strength": strength}

    scenarios = {
        "plain": {"positive": [("A", {})], "negative": [("N", {})]},
        "combine_strengths": {"positive": [("A", {}), ("B", {"strength": 0.6})], "negative": [("N", {})]},
        "area_inside": {"positive": [("A", {}), ("B", area(36, 20, 2, 6, 0.7))], "negative": [("N", {})]},
        "area_at_origin_and_clipped": {
            "positive": [("A", {}), ("B", area(6, 12, 0, 0)), ("C", area(30, 60, 4, 10, 1.3))],
            "negative": [("N", {}), ("M", area(40, 8, 0, 8))],
        },
        "areas_overlapping_same_size": {
            "positive": [("B", area(16, 16, 0, 0)), ("C", area(16, 16, 8, 8, 0.5)), ("A", area(16, 16, 20, 30, 2.0))],
            "negative": [("N", {}), ("M", area(24, 24, 0, 0))],
        },
        "area_percentage": {
            "positive": [
                ("B", {"area": ("percentage", 0.5, 0.4, 0.25, 0.5), "strength": 1.2, "set_area_to_bounds": False}),
                ("A", {}),
            ],
            "negative": [("N", {})],
        },
        "area_uncovered": {"positive": [("B", area(12, 10, 3, 3))], "negative": [("N", {})]},
        "mask_default": {"positive": [("A", {}), ("B", mask("soft", 0.8))], "negative": [("N", {})]},
        "mask_bounds": {
            "positive": [("A", {}), ("B", {**mask("blob", 1.0, True), "strength": 1.5})],
            "negative": [("N", {})],
        },
        "mask_bounds_empty": {"positive": [("A", {}), ("B", mask("empty", 1.0, True))], "negative": [("N", {})]},
        "mask_latent_batch": {
            "positive": [("A", {}), ("B", mask("latent2", 0.5))],
            "negative": [("N", {}), ("M", area(4, 8, 8, 0, 0.9))],
        },
    }
    cases = {}
    for name, sides in scenarios.items():
        out = run_case(x, sigma, sides, contexts, masks)
        cases[name] = {
            "sides": {side: [[ctx, opts] for ctx, opts in entries] for side, entries in sides.items()},
            "out": [digest(t) for t in out],
        }

    node_cases = _node_cases(masks)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    fixture = {
        "note": (
            "Recorded by scripts/record_comfyui_area_conditioning.py in ComfyUI 0.3.64 "
            "(commit a125cd84b054a57729b5eecab930ca9408719832) on the CPU: ComfyUI's "
            "resolve_areas_and_cond_masks_multidim, create_cond_with_same_area_if_none and calc_cond_batch "
            "with a toy model function; inputs are float32 bytes (base64), outputs the SHA-256 of theirs."
        ),
        "comfyui_commit": commit or "a125cd84b054a57729b5eecab930ca9408719832",
        "x": b64(x),
        "sigma": b64(sigma),
        "contexts": {k: b64(v) for k, v in contexts.items()},
        "masks": {k: b64(v) for k, v in masks.items()},
        "cases": cases,
        "nodes": node_cases,
    }
    with open(out_path, "w") as f:
        json.dump(fixture, f, indent=1)


def _node_cases(masks: dict[str, torch.Tensor]) -> list:
    """What each node writes into a conditioning entry (tensors by shape)."""
    cond = [[torch.zeros(1, 3, 8), {"pooled_output": None, "strength": 0.3}]]
    calls = [
        ("ConditioningSetArea", {"width": 200, "height": 77, "x": 13, "y": 64, "strength": 0.4}),
        ("ConditioningSetArea", {"width": 64, "height": 64, "x": 0, "y": 0, "strength": 1.0}),
        ("ConditioningSetAreaPercentage", {"width": 0.5, "height": 0.25, "x": 0.1, "y": 0.3, "strength": 2.0}),
        ("ConditioningSetAreaStrength", {"strength": 3.5}),
        ("ConditioningSetMask", {"mask": "blob", "strength": 0.5, "set_cond_area": "default"}),
        ("ConditioningSetMask", {"mask": "empty", "strength": 1.0, "set_cond_area": "mask bounds"}),
    ]
    out = []
    for cls, kwargs in calls:
        args = {k: (masks[v] if k == "mask" else v) for k, v in kwargs.items()}
        (result,) = getattr(nodes, cls)().append(cond, **args)
        opts = {
            k: ({"shape": list(v.shape)} if isinstance(v, torch.Tensor) else (list(v) if isinstance(v, tuple) else v))
            for k, v in result[0][1].items()
        }
        out.append({"class": cls, "inputs": kwargs, "options": opts})
    return out


if __name__ == "__main__":
    main(sys.argv[1])
