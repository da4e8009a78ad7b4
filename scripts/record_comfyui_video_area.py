"""Record what upstream ComfyUI 0.10.0 does with areas on video latents (ConditioningSetAreaPercentageVideo of
comfy_extras.nodes_video_model, and a 2-D area on a video latent), as tests/nodes/test_video_area.py compares with
(tests/nodes/fixtures/comfyui_video_area.json).

Run inside ComfyUI 0.10.0's own environment (it imports ComfyUI's modules and runs its functions; nothing of ComfyUI
is copied here):

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim>:. OMP_NUM_THREADS=1 <venv>/bin/python \\
        /work/main/scripts/record_comfyui_video_area.py /work/main/tests/nodes/fixtures/comfyui_video_area.json

Per case: the node's area option, the area comfy.samplers resolves it to on the latent (sizes then offsets),
get_area_and_mult's area and weight on a latent of that shape, and the opposite-area entries
create_cond_with_same_area_if_none adds to a side holding a plain entry and a 3-D area over the whole latent (a
2-D area beside a 3-D one makes 0.10.0 fail there: it widens a tuple with a list).
"""

from __future__ import annotations

import json
import sys

import torch
from comfyui_recording import b64

# (node inputs: width, height, temporal, x, y, z, strength; latent shape)
CASES = [
    ((0.5, 0.75, 0.5, 0.25, 0.0, 0.5, 1.0), [1, 4, 8, 16, 16]),
    ((1.0, 1.0, 0.3, 0.0, 0.0, 0.0, 0.7), [2, 4, 10, 8, 12]),
    ((0.25, 0.5, 1.0, 0.75, 0.5, 0.0, 1.5), [1, 16, 5, 32, 24]),
    ((0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 1.0), [1, 4, 16, 40, 40]),
]
PLAIN_AREAS = [((4, 6, 2, 3), [1, 4, 8, 16, 16]), ((40, 40, 0, 0), [1, 4, 5, 32, 32])]


def main() -> None:
    out_path = sys.argv[1]
    sys.argv = [sys.argv[0], "--cpu"]
    sys.path.insert(0, ".")
    import comfy.options

    comfy.options.enable_args_parsing()
    import utils.install_util  # noqa: F401  (before nodes: comfy/ on the path shadows the utils package)
    from comfy import samplers
    from comfy_extras.nodes_video_model import ConditioningSetAreaPercentageVideo

    import nodes  # noqa: F401

    torch.set_num_threads(1)
    record: dict = {"cases": [], "plain": []}

    def mult_of(entry: dict, shape: list[int]) -> tuple:
        got = samplers.get_area_and_mult(
            {**entry, "model_conds": {}, "uuid": 0}, torch.zeros(shape), torch.tensor([500.0])
        )
        return list(got.area), b64(got.mult)

    for inputs, shape in CASES:
        (out,) = ConditioningSetAreaPercentageVideo().append([[torch.zeros(1, 2, 3), {}]], *inputs)
        entry = dict(out[0][1])
        conds = [dict(entry)]
        samplers.resolve_areas_and_cond_masks_multidim(conds, shape[2:], "cpu")
        area, mult = mult_of(conds[0], shape)
        whole = {"area": tuple(shape[2:]) + (0, 0, 0), "model_conds": {"which": "whole"}}
        side = [{"model_conds": {"which": "plain"}}, whole]
        samplers.create_cond_with_same_area_if_none(side, {**conds[0], "model_conds": {}})
        record["cases"].append(
            {
                "inputs": list(inputs),
                "shape": shape,
                "option": list(entry["area"]),
                "strength": entry["strength"],
                "resolved": list(conds[0]["area"]),
                "area": area,
                "mult": mult,
                "opposite_from": [c["model_conds"]["which"] for c in side[2:]],
                "opposite_area": [list(c["area"]) for c in side[2:]],
            }
        )
    for area_in, shape in PLAIN_AREAS:
        area, mult = mult_of({"area": area_in, "strength": 1.0}, shape)
        record["plain"].append({"area_in": list(area_in), "shape": shape, "area": area, "mult": mult})
    with open(out_path, "w") as f:
        json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()
