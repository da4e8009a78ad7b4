"""Record what ComfyUI's deprecated PerpNeg MODEL patch computes, as a fixture for nodes.library.perpneg.

Run inside ComfyUI's own environment (it imports ComfyUI's modules and runs their code; nothing of ComfyUI is
copied here):

    cd <ComfyUI source> && PYTHONPATH=<site>:. OMP_NUM_THREADS=2 <ComfyUI venv>/bin/python \\
        /work/main/scripts/record_comfyui_perpneg_patch.py /work/main/tests/nodes/fixtures/comfyui_perpneg_patch.json

PerpNeg runs on a stand-in MODEL that captures the sampler_cfg_function it registers. The function is then
called with ComfyUI's argument dict built from seeded tensors; comfy.samplers.calc_cond_batch (and the
cond encoding before it) are replaced by stand-ins that record what they were asked for and return a fixed
"empty prompt" prediction, so the fixture holds the function's own arithmetic and its calls.
Tensors are stored as float32 (base64).
"""

from __future__ import annotations

import json
import sys

import torch
from comfyui_recording import b64, comfyui_on_cpu

comfyui_on_cpu(sys.argv[1])
import comfy.samplers  # noqa: E402
from comfy_extras import nodes_perpneg  # noqa: E402

COMFYUI = "0.3.64 (a125cd84b054a57729b5eecab930ca9408719832)"


def seeded(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


class Recorder:
    """Just enough of a ModelPatcher: records the CFG function PerpNeg registers."""

    def __init__(self) -> None:
        self.cfg_function = None

    def clone(self) -> Recorder:
        return self

    def set_model_sampler_cfg_function(self, fn, disable_cfg1_optimization=False) -> None:
        self.cfg_function = fn


def main(out_path: str) -> None:
    x, cond, uncond, empty = (seeded(s, 2, 4, 6, 5) for s in (1, 2, 3, 4))
    context = seeded(5, 1, 7, 8)
    calls: list = []

    def encode_model_conds(extra_conds, conds, x_in, device, prompt_type):
        calls.append({"prompt_type": prompt_type, "contexts": [b64(c["cross_attn"]) for c in conds]})
        return conds

    def calc_cond_batch(model, conds, x_in, sigma, model_options):
        calls[-1].update(
            n_conds=len(conds),
            same_x=bool(torch.equal(x_in, x)),
            model_options_passed=model_options.get("marker") == "options",
        )
        return [empty * (1.0 + 0.1 * float(sigma.reshape(-1)[0]))]

    comfy.samplers.encode_model_conds = encode_model_conds
    comfy.samplers.calc_cond_batch = calc_cond_batch
    model = type("M", (), {"extra_conds": None})()
    cases = []
    for neg_scale, cfg, sigma in ((1.0, 8.0, 3.0), (0.0, 3.0, 0.5), (2.5, 1.0, 7.0)):
        m = Recorder()
        nodes_perpneg.PerpNeg.execute(m, [[context, {}]], neg_scale)
        s = torch.full((2,), sigma)
        args = {
            "cond": x - cond,
            "uncond": x - uncond,
            "cond_scale": cfg,
            "timestep": s,
            "input": x,
            "sigma": s,
            "cond_denoised": cond,
            "uncond_denoised": uncond,
            "model": model,
            "model_options": {"marker": "options"},
        }
        out = m.cfg_function(args)
        cases.append({"neg_scale": neg_scale, "cfg": cfg, "sigma": sigma, "out": b64(out), "call": calls[-1]})
    data = {
        "comfyui": COMFYUI,
        "recorded_by": "scripts/record_comfyui_perpneg_patch.py",
        "x": b64(x),
        "cond": b64(cond),
        "uncond": b64(uncond),
        "empty": b64(empty),
        "context": b64(context),
        "empty_prediction": "empty * (1 + 0.1 * sigma), what the stand-in calc_cond_batch returns",
        "cases": cases,
    }
    with open(out_path, "w") as f:
        json.dump(data, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
