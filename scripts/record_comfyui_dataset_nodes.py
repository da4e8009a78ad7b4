"""Record upstream ComfyUI 0.10.0's outputs of its dataset nodes (comfy_extras/nodes_dataset.py: the image and
text transforms, shuffles, deduplication, grid, resolution bucket) as a test fixture.

Run inside ComfyUI 0.10.0's own environment (commit 79cdbc81 of hiddenswitch/ComfyUI; it imports ComfyUI's
modules, nothing of ComfyUI is copied here; recipe in ../shared/reference/running-real-comfyui.md):

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim> <venv>/bin/python \\
        /work/main/scripts/record_comfyui_dataset_nodes.py /work/main/tests/nodes/fixtures/comfyui_dataset_nodes.json.xz

Inputs are seeded tensors (`inputs()`, shared with the test); outputs are stored in full (they are small).
"""

from __future__ import annotations

import importlib
import sys

import torch

# (class, its widget values) of the nodes run once per image, each on every image of `inputs()`
IMAGE_CASES = [
    ("ResizeImagesByShorterEdge", {"shorter_edge": 3}),
    ("ResizeImagesByShorterEdge", {"shorter_edge": 11}),
    ("ResizeImagesByLongerEdge", {"longer_edge": 9}),
    ("ResizeImagesByLongerEdge", {"longer_edge": 4}),
    ("CenterCropImages", {"width": 4, "height": 3}),
    ("CenterCropImages", {"width": 9, "height": 2}),
    ("RandomCropImages", {"width": 3, "height": 2, "seed": 7}),
    ("RandomCropImages", {"width": 2, "height": 20, "seed": 2**40 + 5}),
    ("NormalizeImages", {"mean": 0.4, "std": 0.2}),
    ("AdjustBrightness", {"factor": 1.5}),
    ("AdjustContrast", {"factor": 0.6}),
    ("AdjustContrast", {"factor": 1.8}),
]
TEXT_CASES = [
    ("TextToLowercase", {}),
    ("TextToUppercase", {}),
    ("TruncateText", {"max_length": 5}),
    ("AddTextPrefix", {"prefix": "a photo of "}),
    ("AddTextSuffix", {"suffix": ", sharp"}),
    ("ReplaceText", {"find": "o", "replace": "0"}),
    ("StripWhitespace", {}),
]
TEXTS = ["  A Cat on a Mat\n", "ÉTÉ sous la Pluie", "", "tab\tend  "]
SEEDS = [0, 3, 2**33 + 1]
DEDUP_THRESHOLDS = [0.95, 0.8, 0.3]


def inputs() -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(35)
    base = torch.rand(1, 6, 8, 3, generator=gen)
    return {
        "wide": torch.rand(1, 5, 7, 3, generator=gen),
        "tall": torch.rand(1, 9, 4, 3, generator=gen),
        "square": torch.rand(1, 6, 6, 3, generator=gen),
        # near duplicates of `base` for the deduplication: a faint change, a stronger one, its negative
        "base": base,
        "base_faint": (base + 0.01).clamp(0, 1),
        "base_noisy": (base + 0.3 * torch.rand(1, 6, 8, 3, generator=gen)).clamp(0, 1),
        "base_negative": 1 - base,
    }


def _values(tensor: torch.Tensor) -> dict:
    return {"shape": list(tensor.shape), "values": tensor.flatten().tolist()}


def _index_of(item: torch.Tensor, pool: list[torch.Tensor]) -> int:
    return next(i for i, p in enumerate(pool) if p is item or torch.equal(p, item))


def record() -> dict:
    sys.argv = [sys.argv[0], "--cpu"]
    sys.path.insert(0, ".")
    import comfy.options

    comfy.options.enable_args_parsing()

    ds = importlib.import_module("comfy_extras.nodes_dataset")
    by_id = {
        getattr(c, "node_id", None) or c.define_schema().node_id: c
        for c in vars(ds).values()
        if isinstance(c, type)
        and issubclass(c, ds.io.ComfyNode)
        and c.__module__ == ds.__name__
        and c not in (ds.ImageProcessingNode, ds.TextProcessingNode)
    }
    x = inputs()
    out: dict = {"image": {}, "text": {}}
    for i, (name, params) in enumerate(IMAGE_CASES):
        for key in ("wide", "tall", "square"):
            out["image"][f"{i}-{key}"] = _values(by_id[name].execute(x[key], **params).result[0])
    for i, (name, params) in enumerate(TEXT_CASES):
        # the per-text function itself (execute wraps each result in a one-item list, see the test)
        out["text"][str(i)] = [by_id[name]._process(t, **params) for t in TEXTS]
    pool = [x[k] for k in ("wide", "tall", "square", "base", "base_faint")]
    out["shuffle"] = {
        str(s): [_index_of(t, pool) for t in by_id["ShuffleDataset"].execute(pool, seed=[s]).result[0]] for s in SEEDS
    }
    texts = [f"text {i}" for i in range(len(pool))]
    out["shuffle_pairs"] = {str(s): by_id["ShuffleImageTextDataset"].execute(pool, texts, [s]).result[1] for s in SEEDS}
    dedup = [x[k] for k in ("base", "wide", "base_faint", "base_noisy", "base_negative", "square")]
    out["dedup"] = {
        str(t): [
            _index_of(img, dedup)
            for img in by_id["ImageDeduplication"].execute(dedup, similarity_threshold=[t]).result[0]
        ]
        for t in DEDUP_THRESHOLDS
    }
    grid = (
        by_id["ImageGrid"]
        .execute([x["wide"], x["tall"], x["square"]], columns=[2], cell_width=[32], cell_height=[32], padding=[3])
        .result[0]
    )
    out["grid"] = _values(grid)
    gen = torch.Generator().manual_seed(36)
    latents = [
        {"samples": torch.rand(2, 4, 3, 5, generator=gen)},
        {"samples": torch.rand(1, 4, 5, 3, generator=gen)},
        {"samples": torch.rand(1, 4, 3, 5, generator=gen)},
    ]
    conds = [["c0", "c1"], ["c2"], ["c3"]]
    buckets, bucket_conds = by_id["ResolutionBucket"].execute(latents, conds).result
    out["bucket"] = {
        "latents": [_values(b["samples"]) for b in buckets],
        "conditioning": bucket_conds,
        "inputs": [_values(lat["samples"]) for lat in latents],
    }
    return out


if __name__ == "__main__":
    # imported here: tests load this module for its inputs without the scripts folder on sys.path
    from comfyui_recording import write_json

    write_json(sys.argv[1], record())
