"""Record what upstream ComfyUI 0.10.0's context windows (comfy/context_windows.py, comfy_extras/nodes_context_windows.py)
compute, as the fixture tests/nodes/test_context_windows.py compares with (tests/nodes/fixtures/
comfyui_context_windows.json).

Run inside ComfyUI 0.10.0's own environment (it imports ComfyUI's modules and runs its handler; nothing of ComfyUI
is copied here; recipe in ../shared/reference/running-real-comfyui.md):

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim>:. OMP_NUM_THREADS=1 <venv>/bin/python \\
        /work/main/scripts/record_comfyui_context_windows.py /work/main/tests/nodes/fixtures/comfyui_context_windows.json

ComfyUI's checkpoint detection refuses the demo SD1 model's tiny sizes, so the handler is recorded on its own: for
each case, the node's IndexListContextHandler (made by ContextWindowsManual's execute on a stand-in MODEL) runs
calc_cond_batch's windowing over a seeded latent at each step of a sigma schedule, with a seeded nonlinear
stand-in for the model evaluation of the positive and (or, for a skipped side, None) negative conditioning; stored:
the windows of each step, the blended outputs, and apply_freenoise's shuffle of seeded noise. Tensors are float32
base64. The /object_info entries of both nodes are stored too.
"""

from __future__ import annotations

import base64
import json
import sys

import torch

# (schedule, fuse method, length, overlap, stride, closed loop, dim, latent shape, negative evaluated)
CASES = [
    ("standard_static", "pyramid", 2, 1, 1, False, 0, [5, 4, 3, 3], True),
    ("standard_uniform", "flat", 2, 1, 2, False, 0, [5, 4, 3, 3], True),
    ("looped_uniform", "relative", 3, 1, 1, True, 0, [5, 4, 3, 3], True),
    ("looped_uniform", "pyramid", 4, 2, 2, False, 2, [1, 4, 13, 2, 2], True),
    ("batched", "flat", 2, 0, 1, False, 0, [5, 4, 3, 3], False),
    ("standard_static", "overlap-linear", 3, 1, 1, False, 2, [1, 4, 8, 2, 3], True),
    ("standard_uniform", "pyramid", 5, 2, 3, False, 2, [1, 4, 21, 2, 2], True),
    ("standard_uniform", "relative", 4, 1, 1, False, 2, [1, 4, 11, 2, 2], True),
    ("standard_static", "flat", 6, 3, 1, False, 1, [1, 9, 2, 2], True),
]
SIGMAS = [14.6, 7.1, 3.3, 1.2, 0.4, 0.0]
# (dim, length, overlap, shape, seed)
FREENOISE = [
    (0, 2, 1, [5, 4, 3, 3], 5),
    (2, 4, 2, [1, 4, 13, 2, 2], 7),
    (2, 3, 0, [1, 2, 10, 2, 2], 0),
    (2, 6, 5, [1, 2, 9, 1, 1], 123),
]


def b64(t: torch.Tensor) -> dict:
    t = t.detach().to(torch.float32).contiguous()
    return {"shape": list(t.shape), "f32": base64.b64encode(t.numpy().tobytes()).decode()}


def seeded(seed: int, shape: list[int]) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def stand_in(sub_conds: list, sub_x: torch.Tensor, sub_t: torch.Tensor) -> list:
    """A model evaluation that depends on the window's content and size (tanh of the input, plus its mean along the
    window, scaled by the side and the sigma)."""
    out = []
    for k, cond in enumerate(sub_conds):
        if cond is None:
            out.append(torch.zeros_like(sub_x))
            continue
        scale = 0.3 + 0.2 * k + 0.01 * float(sub_t.reshape(-1)[0])
        out.append(torch.tanh(sub_x * scale) + sub_x.mean() * (k + 1))
    return out


def main() -> None:
    out_path = sys.argv[1]
    sys.argv = [sys.argv[0], "--cpu"]
    sys.path.insert(0, ".")
    import comfy.options

    comfy.options.enable_args_parsing()
    import comfy.context_windows as cw
    import utils.install_util  # noqa: F401  (before nodes: comfy/ on the path shadows the utils package)
    from comfy_extras import nodes_context_windows as cwn

    import nodes  # noqa: F401

    torch.set_num_threads(1)
    record: dict = {"object_info": {}, "sigmas": SIGMAS, "cases": [], "freenoise": []}
    for node in (cwn.ContextWindowsManualNode, cwn.WanContextWindowsManualNode):
        info = node.GET_NODE_INFO_V1()
        info["python_module"] = "comfy_extras.nodes_context_windows"
        record["object_info"][info["name"]] = info

    class Model:  # a stand-in MODEL: what the node's execute touches
        def __init__(self):
            self.model_options = {}
            self.wrappers = []

        def clone(self):
            return self

        def add_wrapper_with_key(self, *args):
            self.wrappers.append(args[1])

    for n, (schedule, fuse, length, overlap, stride, closed, dim, shape, negative) in enumerate(CASES):
        model = Model()
        cwn.ContextWindowsManualNode.execute(model, length, overlap, schedule, stride, closed, fuse, dim, False)
        handler = model.model_options["context_handler"]
        options = {"transformer_options": {"sample_sigmas": torch.tensor(SIGMAS)}}
        x = seeded(100 + n, shape)
        case = {
            "schedule": schedule,
            "fuse": fuse,
            "length": length,
            "overlap": overlap,
            "stride": stride,
            "closed_loop": closed,
            "dim": dim,
            "negative": negative,
            "x": b64(x),
            "steps": [],
        }
        for sigma in SIGMAS[:-1]:
            t = torch.full((shape[0],), sigma)
            conds = [[{}], [{}] if negative else None]
            windows = []

            def calc(model_, sub_conds, sub_x, sub_t, options_, into=windows):
                into.append(options_["transformer_options"]["context_window"].index_list)
                return stand_in(sub_conds, sub_x, sub_t)

            used = handler.should_use_context(None, conds, x, t, options)
            out = handler.execute(calc, None, conds, x, t, options) if used else stand_in(conds, x, t)
            case["steps"].append({"used": used, "windows": windows, "out": [b64(o) for o in out]})
        record["cases"].append(case)
    for dim, length, overlap, shape, seed in FREENOISE:
        noise = seeded(seed + 1, shape)
        record["freenoise"].append(
            {
                "dim": dim,
                "length": length,
                "overlap": overlap,
                "seed": seed,
                "noise": b64(noise),
                "out": b64(cw.apply_freenoise(noise.clone(), dim, length, overlap, seed)),
            }
        )
    with open(out_path, "w") as f:
        json.dump(record, f, indent=1, default=str)


if __name__ == "__main__":
    main()
