"""Record what ComfyUI's vocoder with bandwidth extension (LTX-2.3 / 2.5's audio VAE files) computes on the tiny
LTX-2.5 audio VAE file, for tests/models/test_ltx2_bwe_vocoder.py (tests/models/fixtures/comfyui_ltx25_vocoder.json).

No runnable ComfyUI has this vocoder (0.10.0 predates it), so ComfyUI's own module is run at development time:
comfy/ldm/lightricks/vocoders/vocoder.py (Comfy-Org/ComfyUI 8ce4c98d), saved outside this repository in a folder
that also holds stand-ins for what it imports (comfy.ops.disable_weight_init's Conv1d/ConvTranspose1d,
comfy.model_management.cast_to). Nothing of it is committed. Given that folder:

    OMP_NUM_THREADS=1 python scripts/record_comfyui_ltx25_audio_vae.py <folder> \\
        tests/models/fixtures/comfyui_ltx25_vocoder.json

VocoderWithBWE is built from the file's metadata config ("vocoder" section) as ComfyUI's AudioVAE builds it and
loaded from the file's `vocoder.*` tensors (nodes/models/ltx25_audio_demo.py). Recorded: two input mel spectrograms
[B, 2, frames, 64] of different lengths and the waveforms."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from comfyui_recording import b64, sha256  # noqa: E402

from nodes.models.ltx25_audio_demo import build  # noqa: E402

FRAMES = (9, 14)


def main(argv: list[str]) -> int:
    reference, out = argv
    sys.path.insert(0, reference)
    torch.set_num_threads(1)
    from comfy.ldm.lightricks.vocoders.vocoder import VocoderWithBWE

    with tempfile.TemporaryDirectory(prefix="hA_ltx25_audio_") as tmp:
        path = build(Path(tmp))
        with safe_open(str(path), "pt") as f:
            config = json.loads(f.metadata()["config"])["vocoder"]
        sd = {k[len("vocoder.") :]: v.float() for k, v in load_file(str(path)).items() if k.startswith("vocoder.")}
        vocoder = VocoderWithBWE(config)
        missing, unexpected = vocoder.load_state_dict(sd, strict=False)
        if missing or unexpected:
            raise SystemExit(
                f"ComfyUI's vocoder does not take the file: missing {missing[:4]}, unexpected {unexpected[:4]}"
            )
        vocoder.eval()
        g = torch.Generator().manual_seed(3)
        cases = []
        with torch.no_grad():
            for frames in FRAMES:
                mel = torch.randn(1, 2, frames, 64, generator=g) - 2.0
                # ComfyUI's AudioVAE.run_vocoder hands the vocoder the mel spectrogram as [B, 2, mel bins, frames]
                waveform = vocoder(mel.transpose(2, 3))
                cases.append({"mel": b64(mel), "waveform": b64(waveform)})
        record = {
            "source": "Comfy-Org/ComfyUI comfy/ldm/lightricks/vocoders/vocoder.py 8ce4c98d (VocoderWithBWE)",
            "file_sha256": sha256(str(path)),
            "output_sample_rate": int(vocoder.output_sample_rate),
            "cases": cases,
        }
    Path(out).write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
