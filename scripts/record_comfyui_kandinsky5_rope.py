"""Record upstream ComfyUI 0.10.0's (commit 79cdbc81 of hiddenswitch/ComfyUI) Kandinsky 5 video DiT output under
ScaleROPE's rope_options (transformer_options["rope_options"], as ModelPatcher.set_model_rope_options sets them) on
kandinsky5-tiny, as the fixture tests/models/test_kandinsky5.py checks our rotary positions against
(tests/models/fixtures/comfyui_kandinsky5_rope.json.xz).

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim>:/work/main/scripts:. OMP_NUM_THREADS=1 \\
        <venv>/bin/python /work/main/scripts/record_comfyui_kandinsky5_rope.py \\
        /work/main/tests/models/fixtures/comfyui_kandinsky5_rope.json <models>

The text widths are given as scripts/record_comfyui_kandinsky5.py gives them; nothing else is changed. Inputs are the
seeded draws of that recorder (seed 41 here), which the test makes again.
"""

from __future__ import annotations

import sys

import torch
from comfyui_recording import MAX_RECORDED_VALUES, b64, comfyui_on_cpu, sha256, write_json

ARGS = sys.argv[1:3]
comfyui_on_cpu()
import comfy.sd  # noqa: E402
import comfy.supported_models  # noqa: E402
import comfy.utils  # noqa: E402

COMMIT = "79cdbc81"
FILE = "diffusion_models/kandinsky5lite_t2v_tiny.safetensors"
CASES = {  # ScaleROPE's values (it always sets all six)
    "identity": {"scale_x": 1.0, "shift_x": 0.0, "scale_y": 1.0, "shift_y": 0.0, "scale_t": 1.0, "shift_t": 0.0},
    "scaled": {"scale_x": 1.5, "shift_x": 2.0, "scale_y": 0.5, "shift_y": 1.0, "scale_t": 2.0, "shift_t": 0.5},
}


def inputs(seed: int = 41) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "x": torch.randn(2, 33, 3, 8, 12, generator=g),
        "context": torch.randn(2, 7, 32, generator=g),
        "y": torch.randn(2, 32, generator=g),
    }


def main() -> None:
    torch.set_num_threads(1)
    out_path, models = ARGS
    path = f"{models}/{FILE}"
    comfy.supported_models.Kandinsky5.unet_extra_config = {"in_text_dim": 32, "in_text_dim2": 32}
    dit = comfy.sd.load_diffusion_model_state_dict(
        comfy.utils.load_torch_file(path), model_options={"dtype": torch.float32}
    ).model.diffusion_model
    data = inputs()
    t = torch.tensor([937.5, 250.0])
    out = {"comfyui_commit": COMMIT, "file_sha256": sha256(path), "timesteps": t.tolist(), "cases": {}}
    out["input_sums"] = {k: float(v.sum()) for k, v in data.items()}
    with torch.no_grad():
        for name, rope in CASES.items():
            raw = dit(data["x"], t, data["context"], data["y"], transformer_options={"rope_options": dict(rope)})
            out["cases"][name] = {"rope_options": rope, "raw": b64(raw, MAX_RECORDED_VALUES)}
    print("wrote", write_json(out_path, out), file=sys.stderr)


if __name__ == "__main__":
    main()
