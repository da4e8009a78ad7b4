"""Area and mask conditioning against ComfyUI 0.3.64's own functions (tests/nodes/fixtures/
comfyui_area_conditioning.json, recorded by scripts/record_comfyui_area_conditioning.py): what the four nodes
write into a conditioning entry, and the blended prediction of each side after the head's resolution
(percentage areas, masks resized, mask bounds, opposite-area entries) and the denoise step's crops and
weights, bit for bit, with the same toy model function on both sides."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from nodes.conditioning import flatten
from nodes.conditioning_areas import resolve
from nodes.library.conditioning_area import NODE_CLASS_MAPPINGS
from nodes.modelfns.denoise import DenoiseParams, GuidedDenoiser
from nodes.models.components import SD1_LATENT, DiffusionModel
from tests.recorded_tensors import tensor

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_area_conditioning.json").read_text())


CONTEXTS = {k: tensor(v) for k, v in FIXTURE["contexts"].items()}
MASKS = {k: tensor(v) for k, v in FIXTURE["masks"].items()}


class ToyModel(DiffusionModel):
    """The recording's model function as a DiffusionModel (its module has no UNet blocks to patch)."""

    def apply(self, x: torch.Tensor, t: torch.Tensor, cond: dict) -> torch.Tensor:
        h, w = x.shape[2:]
        grid = torch.arange(h * w, dtype=torch.float32).reshape(1, 1, h, w) / 100.0
        return x * 0.75 + cond["context"].mean(dim=(1, 2)).reshape(-1, 1, 1, 1) + 0.1 * t.reshape(-1, 1, 1, 1) + grid


# The recording's model function returns the denoised prediction itself: identity scalings.
IDENTITY = SimpleNamespace(
    calculate_input=lambda s, x: x, timestep=lambda s: s, calculate_denoised=lambda s, out, x: out
)


def conditioning(entries: list) -> list:
    out = []
    for ctx, opts in entries:
        opts = dict(opts)
        if isinstance(opts.get("mask"), str):
            m = MASKS[opts["mask"]]
            opts["mask"] = m.unsqueeze(0) if m.ndim == 2 else m
        if isinstance(opts.get("area"), list):
            opts["area"] = tuple(opts["area"])
        out.append([CONTEXTS[ctx], opts])
    return out


@pytest.mark.parametrize("case", sorted(FIXTURE["cases"]))
def test_blended_predictions_equal_comfyuis(case):
    rec = FIXTURE["cases"][case]
    x, sigma = tensor(FIXTURE["x"]), tensor(FIXTURE["sigma"])
    names = list(rec["sides"])
    sides = resolve([conditioning(rec["sides"][n]) for n in names], x.shape)
    inputs, params = {}, {"cfg": 1.0}
    for name, side in zip(names, sides):
        tensors, params[name] = flatten(name, side, lambda p: 1.0 - p)  # every entry active at sigma 1.5
        inputs.update(tensors)
    model = ToyModel(arch="sd1", module=torch.nn.Identity(), latent_format=SD1_LATENT, sampling={})
    step = DenoiseParams(sampler="euler", seed=0, model_sampling={}, **params)
    denoiser = GuidedDenoiser(model, IDENTITY, inputs, step, load_control=None)
    ours = denoiser._predict(x, sigma, 1.0, [params[n] for n in names])
    for name, got, want in zip(names, ours, rec["out"]):
        got = got.contiguous()
        assert hashlib.sha256(got.numpy().tobytes()).hexdigest() == want["sha256"], (
            f"{case}/{name}: sum {float(got.double().sum())} (ComfyUI {want['sum']}), "
            f"first values {got.reshape(-1)[:4].tolist()} (ComfyUI {want['corner']})"
        )


@pytest.mark.parametrize("call", FIXTURE["nodes"], ids=lambda c: c["class"])
def test_nodes_write_comfyuis_options(call):
    cond = [[torch.zeros(1, 3, 8), {"pooled_output": None, "strength": 0.3}]]
    kwargs = {k: (MASKS[v] if k == "mask" else v) for k, v in call["inputs"].items()}
    node = NODE_CLASS_MAPPINGS[call["class"]]()
    (result,) = getattr(node, node.FUNCTION)(cond, **kwargs)
    opts = {
        k: ({"shape": list(v.shape)} if isinstance(v, torch.Tensor) else (list(v) if isinstance(v, tuple) else v))
        for k, v in result[0][1].items()
    }
    assert opts == call["options"]
    assert cond[0][1] == {"pooled_output": None, "strength": 0.3}, "the input conditioning was modified"


def test_masks_are_fitted_to_the_latent_batch_on_the_head():
    """ComfyUI weighs sample i with mask i of the first B, the masks repeated when fewer; resolving that once
    keeps the pairing when a step is merged with other requests' steps."""
    masks = torch.rand(3, 4, 4)
    (((_, opts),),) = resolve([[[CONTEXTS["A"], {"mask": masks}]]], (2, 4, 4, 4))
    assert torch.equal(opts["mask"], masks[:2])
    (((_, opts),),) = resolve([[[CONTEXTS["A"], {"mask": masks[:1]}]]], (2, 4, 4, 4))
    assert torch.equal(opts["mask"], masks[:1].repeat(2, 1, 1))
    with pytest.raises(ValueError, match="batch of 2 masks"):
        resolve([[[CONTEXTS["A"], {"mask": masks[:2]}]]], (3, 4, 4, 4))
