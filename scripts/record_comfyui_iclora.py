"""Record what ComfyUI's GetICLoRAParameters returns for a set of LoRA metadata headers (a development-time run).

GetICLoRAParameters is newer than ComfyUI 0.10.0: its newest module code (comfy_extras/nodes_lt.py, Comfy-Org/ComfyUI)
was saved outside this repository as /tmp/mogeref/iclora_ref.py (the body of execute, taking the metadata the
model's "lora_metadata" attachment holds). Run: python scripts/record_comfyui_iclora.py [/tmp/mogeref].
Writes tests/nodes/fixtures/comfyui_iclora.json.xz, read by tests/nodes/test_ltxv_iclora.py."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from comfyui_recording import write_json  # noqa: E402

CASES: list[dict[str, str]] = [
    {},
    {"ss_network_module": "networks.lora"},
    {"reference_downscale_factor": "2"},
    {"modelspec.reference_downscale_factor": "2.0"},
    {"ic_lora.reference_downscale_factor": "1.6"},
    {"reference_downscale_factor": "2.5"},
    {"reference_downscale_factor": "0.5"},
    {"reference_downscale_factor": "-3"},
    {"reference_downscale_factor": "half"},
    {"reference_downscale_factor": "nan"},
    {"other": "x", "a.reference_downscale_factor": "4", "b.reference_downscale_factor": "2"},
]


def main() -> None:
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/mogeref")
    spec = importlib.util.spec_from_file_location("iclora_ref", folder / "iclora_ref.py")
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)
    cases = [{"metadata": m, "parameters": ref.get_iclora_parameters(m)} for m in CASES]
    out = Path(__file__).parents[1] / "tests" / "nodes" / "fixtures" / "comfyui_iclora.json"
    print(write_json(out, {"source": "Comfy-Org/ComfyUI comfy_extras/nodes_lt.py (newest)", "cases": cases}))


if __name__ == "__main__":
    main()
