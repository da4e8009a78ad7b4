"""Record upstream ComfyUI 0.10.0's (commit 79cdbc81 of hiddenswitch/ComfyUI) Kandinsky 5 video DiT output with a LoRA
applied (comfy.sd.load_lora_for_models at strength 0.8, as LoraLoaderModelOnly does) on kandinsky5-tiny, as the
fixture tests/models/test_kandinsky5.py checks our LoRA names and merge against
(tests/models/fixtures/comfyui_kandinsky5_lora.json.xz).

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim>:/work/main/scripts:. OMP_NUM_THREADS=1 \\
        <venv>/bin/python /work/main/scripts/record_comfyui_kandinsky5_lora.py \\
        /work/main/tests/models/fixtures/comfyui_kandinsky5_lora.json <models> <tmp dir>

The LoRA is seeded draws (the test draws them again and checks the file's sha256): rank 4, PEFT names
(`diffusion_model.<layer>.lora_A / lora_B`) on two layers and kohya names (`lora_unet_<layer>`, lora_down / lora_up
with alpha 2) on two others. Inputs are scripts/record_comfyui_kandinsky5_rope.py's draws (seed 41).
"""

from __future__ import annotations

import sys

import torch
from comfyui_recording import MAX_RECORDED_VALUES, b64, comfyui_on_cpu, sha256, write_json

ARGS = sys.argv[1:4]
comfyui_on_cpu()
import comfy.sd  # noqa: E402
import comfy.supported_models  # noqa: E402
import comfy.utils  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

COMMIT = "79cdbc81"
FILE = "diffusion_models/kandinsky5lite_t2v_tiny.safetensors"
STRENGTH = 0.8
PEFT = ("visual_transformer_blocks.0.self_attention.to_query", "text_transformer_blocks.0.feed_forward.in_layer")
KOHYA = ("visual_transformer_blocks.1.cross_attention.to_value", "out_layer.out_layer")


def lora_tensors(shapes: dict[str, tuple[int, int]], seed: int = 43) -> dict[str, torch.Tensor]:
    """The LoRA's tensors for layers of these (out, in) shapes, in PEFT then kohya order."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for name in PEFT:
        o, i = shapes[name]
        out[f"diffusion_model.{name}.lora_A.weight"] = torch.randn(4, i, generator=g) * 0.2
        out[f"diffusion_model.{name}.lora_B.weight"] = torch.randn(o, 4, generator=g) * 0.2
    for name in KOHYA:
        o, i = shapes[name]
        key = "lora_unet_" + name.replace(".", "_")
        out[f"{key}.lora_down.weight"] = torch.randn(4, i, generator=g) * 0.2
        out[f"{key}.lora_up.weight"] = torch.randn(o, 4, generator=g) * 0.2
        out[f"{key}.alpha"] = torch.tensor(2.0)
    return out


def inputs(seed: int = 41) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "x": torch.randn(2, 33, 3, 8, 12, generator=g),
        "context": torch.randn(2, 7, 32, generator=g),
        "y": torch.randn(2, 32, generator=g),
    }


def main() -> None:
    torch.set_num_threads(1)
    out_path, models, tmp = ARGS
    path = f"{models}/{FILE}"
    sd = comfy.utils.load_torch_file(path)
    shapes = {n: tuple(sd[f"{n}.weight"].shape) for n in PEFT + KOHYA}
    lora_path = f"{tmp}/kandinsky5_lora_test.safetensors"
    save_file(lora_tensors(shapes), lora_path)
    comfy.supported_models.Kandinsky5.unet_extra_config = {"in_text_dim": 32, "in_text_dim2": 32}
    patcher = comfy.sd.load_diffusion_model_state_dict(sd, model_options={"dtype": torch.float32})
    patched, _ = comfy.sd.load_lora_for_models(patcher, None, comfy.utils.load_torch_file(lora_path), STRENGTH, 0)
    patched.patch_model()
    applied = len(patched.patches)
    dit = patched.model.diffusion_model
    data = inputs()
    t = torch.tensor([937.5, 250.0])
    with torch.no_grad():
        raw = dit(data["x"], t, data["context"], data["y"])
    write_json(
        out_path,
        {
            "comfyui_commit": COMMIT,
            "file_sha256": sha256(path),
            "lora_sha256": sha256(lora_path),
            "strength": STRENGTH,
            "patched_layers": applied,
            "timesteps": t.tolist(),
            "raw": b64(raw, MAX_RECORDED_VALUES),
        },
    )
    print("patched", applied, file=sys.stderr)


if __name__ == "__main__":
    main()
