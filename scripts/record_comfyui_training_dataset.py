"""Record what upstream ComfyUI 0.10.0's Save Training Dataset writes (shard names, metadata.json, the shards'
bytes) and what its Load Training Dataset reads back, as a test fixture.

Run inside ComfyUI 0.10.0's own environment (commit 79cdbc81 of hiddenswitch/ComfyUI; it imports ComfyUI's
modules, nothing of ComfyUI is copied here; recipe in ../shared/reference/running-real-comfyui.md):

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim> <venv>/bin/python \\
        /work/main/scripts/record_comfyui_training_dataset.py /work/main/tests/nodes/fixtures/comfyui_training_dataset.json

The samples are `samples()` (seeded latents and conditionings, shared with the test); shards are stored as base64.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import tempfile

import torch


def samples() -> tuple[list, list]:
    gen = torch.Generator().manual_seed(34)
    latents = [{"samples": torch.rand(1, 4, 2, 3, generator=gen)} for _ in range(5)]
    conditioning = [
        [[torch.rand(1, 3, 8, generator=gen), {"pooled_output": torch.rand(1, 8, generator=gen)}]] for _ in range(5)
    ]
    return latents, conditioning


SHARD_SIZE = 2


def record() -> dict:
    sys.argv = [sys.argv[0], "--cpu"]
    sys.path.insert(0, ".")
    import comfy.options

    comfy.options.enable_args_parsing()
    import folder_paths
    import server  # noqa: F401
    import utils.install_util  # noqa: F401  (before nodes: comfy/ on the path shadows the utils package)
    from comfy_extras.nodes_dataset import LoadTrainingDataset, SaveTrainingDataset

    import nodes  # noqa: F401

    latents, conditioning = samples()
    with tempfile.TemporaryDirectory() as out:
        folder_paths.set_output_directory(out)
        SaveTrainingDataset.execute(latents, conditioning, ["sets/run1"], [SHARD_SIZE])
        folder = os.path.join(out, "sets", "run1")
        files = {}
        for name in sorted(os.listdir(folder)):
            with open(os.path.join(folder, name), "rb") as f:
                files[name] = base64.b64encode(f.read()).decode("ascii")
        loaded = LoadTrainingDataset.execute("sets/run1").result
    round_trip = (
        all(torch.equal(a["samples"], b["samples"]) for a, b in zip(loaded[0], latents))
        and len(loaded[0]) == len(latents)
        and all(torch.equal(a[0][0], b[0][0]) for a, b in zip(loaded[1], conditioning))
    )
    return {"files": files, "loads_back_its_own": round_trip}


if __name__ == "__main__":
    with open(sys.argv[1], "w", encoding="utf-8") as f:
        json.dump(
            {
                "source": "upstream ComfyUI 0.10.0 (commit 79cdbc81 of hiddenswitch/ComfyUI), "
                "comfy_extras.nodes_dataset Save/LoadTrainingDataset; "
                "scripts/record_comfyui_training_dataset.py",
                **record(),
            },
            f,
            indent=1,
        )
        f.write("\n")
