"""Record what ComfyUI's CheckpointLoader takes from each config it ships (models/configs/*.yaml), as a fixture.

comfy.sd.load_checkpoint reads two things from a config: `model.params.parameterization` ("v" switches the
model to v-prediction) and `model.params.cond_stage_config.params.layer_idx` (a CLIP skip). This reads them
the same way from ComfyUI's own files (nothing of ComfyUI is copied):

    cd <ComfyUI source> && <ComfyUI venv>/bin/python /work/main/scripts/record_comfyui_checkpoint_configs.py \\
        /work/main/tests/nodes/fixtures/comfyui_checkpoint_configs.json
"""

from __future__ import annotations

import json
import os
import sys

import yaml


def main(out_path: str) -> None:
    configs = {}
    for name in sorted(os.listdir("models/configs")):
        if name.endswith(".yaml"):
            with open(os.path.join("models/configs", name)) as f:
                params = yaml.safe_load(f)["model"]["params"]
            configs[name] = {
                "v_prediction": params.get("parameterization") == "v",
                "layer_idx": params["cond_stage_config"].get("params", {}).get("layer_idx"),
            }
    record = {
        "comfyui_commit": "a125cd84b054a57729b5eecab930ca9408719832",
        "recorded_by": "scripts/record_comfyui_checkpoint_configs.py on ComfyUI's models/configs",
        "configs": configs,
    }
    with open(out_path, "w") as f:
        json.dump(record, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
