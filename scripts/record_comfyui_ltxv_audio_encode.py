"""Record upstream ComfyUI 0.10.0's LTX-2 audio VAE encode (comfy/ldm/lightricks/vae/audio_vae.py's AudioVAE, as
LTXVAudioVAEEncode runs it) on the demo's tiny LTX-2 checkpoint (nodes/models/ltx2_demo.py,
checkpoints/ltx-2-19b-dev_tiny.safetensors: its audio_vae.* and metadata config), as
tests/nodes/fixtures/comfyui_ltxv_audio_encode.json (tests/nodes/test_ltxv_audio_encode.py).

ComfyUI's audio preprocessing calls torchaudio (resample, MelSpectrogram), which has no build for torch 2.13: the
pure-Python torchaudio 2.9.1 wheel is put on PYTHONPATH with its C libraries moved aside (resampling and the mel
spectrogram need none of them). Nothing of ComfyUI or torchaudio is copied here. Run inside ComfyUI 0.10.0's own
environment after the tiny checkpoint was written:

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim>:<torchaudio 2.9.1, C libraries aside>:. \\
        OMP_NUM_THREADS=1 <venv>/bin/python /work/main/scripts/record_comfyui_ltxv_audio_encode.py \\
        /work/main/tests/nodes/fixtures/comfyui_ltxv_audio_encode.json <models dir>

Recorded per case (CASES: stereo at 44.1 kHz, mono spread to stereo at the VAE's own 16 kHz, a batch of two at
24 kHz): the seeded waveform's seed and shape, its rate, and ComfyUI's normalised latent.
"""

from __future__ import annotations

import json
import sys

import torch
from comfyui_recording import b64, sha256

OUT, MODELS = sys.argv[1:3]
CHECKPOINT = "checkpoints/ltx-2-19b-dev_tiny.safetensors"
SOURCE = "ComfyUI 0.10.0 (hiddenswitch/ComfyUI 79cdbc81, upstream's commits), torchaudio 2.9.1's Python code"
# (seed, [batch, channels, samples], sample rate)
CASES = [(60, [1, 2, 22050], 44100), (61, [1, 1, 8000], 16000), (62, [2, 2, 9000], 24000)]


def main() -> None:
    sys.argv = [sys.argv[0], "--cpu"]
    import comfy.options

    comfy.options.enable_args_parsing()
    from comfy.ldm.lightricks.vae.audio_vae import AudioVAE
    from safetensors import safe_open
    from safetensors.torch import load_file

    torch.set_num_threads(1)
    path = f"{MODELS}/{CHECKPOINT}"
    with safe_open(path, "pt") as f:
        metadata = f.metadata()
    vae = AudioVAE(load_file(path), metadata)
    cases = []
    for seed, shape, rate in CASES:
        waveform = 0.3 * torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
        latent = vae.encode({"waveform": waveform, "sample_rate": rate})
        cases.append({"seed": seed, "shape": shape, "sample_rate": rate, "latent": b64(latent)})
    digest = sha256(path)
    out = {
        "source": SOURCE,
        "recorded_by": "scripts/record_comfyui_ltxv_audio_encode.py",
        "files": {"checkpoint": {"path": CHECKPOINT, "sha256": digest}},
        "vae_sample_rate": int(vae.sample_rate),
        "cases": cases,
    }
    with open(OUT, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
