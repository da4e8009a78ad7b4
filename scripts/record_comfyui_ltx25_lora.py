"""Record ComfyUI's LTX-2.5 transformer with a LoRA applied, for tests/models/test_ltx25_transformer.py
(tests/models/fixtures/comfyui_ltx25_lora.json).

Two ComfyUI codes at development time, nothing of them committed: ComfyUI 0.3.64's comfy/lora.py (runnable here)
merges the tiny LoRA (nodes/models/ltx25_transformer_demo.py) into the tiny LTX-2.5 transformer file as its
LoraLoaderModelOnly does (model_lora_keys_unet's names for the file's `diffusion_model.` keys, load_lora,
calculate_weight at the strength; in a subprocess with 0.3.64's Python), then ComfyUI's own LTX-2.5 modules (the
folder scripts/record_comfyui_ltx25_transformer.py describes) run the merged weights on that recorder's first input.

    OMP_NUM_THREADS=1 python scripts/record_comfyui_ltx25_lora.py <ComfyUI 0.3.64 folder> <its python> \\
        <LTX-2.5 reference folder> tests/models/fixtures/comfyui_ltx25_lora.json [<folder of its torchvision shim>]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from safetensors.torch import save_file

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from comfyui_recording import b64, sha256  # noqa: E402

STRENGTHS = (0.5, 1.0)
# Run inside ComfyUI 0.3.64: argv = transformer file, LoRA file, strength, output file.
MERGE = """
import sys, torch
model_file, lora_file, strength, out = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
sys.argv[1:] = ["--cpu"]
import comfy.cli_args
comfy.cli_args.args.cpu = True  # ComfyUI parses no command line on import (scripts/comfyui_recording.py)
import comfy.lora, comfy.utils
from safetensors.torch import load_file, save_file
prefix = "model.diffusion_model."
sd = {"diffusion_model." + k[len(prefix):]: v.float() for k, v in load_file(model_file).items()}

class Config:
    unet_config = {}

class Model:  # what model_lora_keys_unet reads of a model: its state dict's names and its unet config
    model_config = Config()
    def state_dict(self):
        return sd

key_map = comfy.lora.model_lora_keys_unet(Model(), {})
patches = comfy.lora.load_lora(load_file(lora_file), key_map)
for key, patch in patches.items():
    sd[key] = comfy.lora.calculate_weight([(strength, patch, 1.0, None, None)], sd[key].clone(), key)
save_file({prefix + k[len("diffusion_model."):]: v.contiguous() for k, v in sd.items()}, out)
print(len(patches))
"""


def main(argv: list[str]) -> int:
    comfyui, python, reference, out, *extra_paths = argv  # extra: e.g. the folder of 0.3.64's torchvision shim
    sys.path.insert(0, reference)
    torch.set_num_threads(1)
    from record_comfyui_ltx25_transformer import FRAME_RATE, cases, comfyui_model

    from nodes.models.ltx25_transformer_demo import build, tiny_lora_state_dict

    case = cases()[0]
    recorded = []
    with tempfile.TemporaryDirectory(prefix="hA_ltx25_lora_") as tmp:
        model_file = build(Path(tmp))
        lora_file = Path(tmp) / "ltx-2.5-lora_tiny.safetensors"
        save_file(tiny_lora_state_dict(), str(lora_file))
        for strength in STRENGTHS:
            merged = Path(tmp) / f"merged_{strength}.safetensors"
            done = subprocess.run(
                [python, "-c", MERGE, str(model_file), str(lora_file), str(strength), str(merged)],
                cwd=comfyui,
                env={**os.environ, "PYTHONPATH": os.pathsep.join([comfyui, *extra_paths])},
                capture_output=True,
                text=True,
                check=True,
            )
            patched_layers = int(done.stdout.strip().splitlines()[-1])
            # the merged file keeps the tiny file's metadata config for ComfyUI's model sizing
            from safetensors import safe_open
            from safetensors.torch import load_file

            with safe_open(str(model_file), "pt") as f:
                metadata = f.metadata()
            save_file(load_file(str(merged)), str(merged), metadata=metadata)
            model = comfyui_model(merged)
            with torch.no_grad():
                context = model.preprocess_text_embeds(case["context"].clone(), unprocessed=True)
                video, audio = model.forward(
                    [case["video"].clone(), case["audio"].clone()],
                    (case["t_video"], case["t_audio"]),
                    context,
                    None,
                    frame_rate=FRAME_RATE,
                    transformer_options={},
                )
            recorded.append(
                {
                    "strength": strength,
                    "patched_layers": patched_layers,
                    "video_out": b64(video),
                    "audio_out": b64(audio),
                }
            )
        record = {
            "source": "ComfyUI 0.3.64 comfy/lora.py (the merge); the LTX-2.5 modules of "
            "scripts/record_comfyui_ltx25_transformer.py (the forward)",
            "file_sha256": sha256(str(model_file)),
            "lora_sha256": sha256(str(lora_file)),
            "frame_rate": FRAME_RATE,
            "inputs": {k: b64(v) for k, v in case.items() if k != "name"},
            "cases": recorded,
        }
    Path(out).write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
