"""ltx2.5-tiny audio VAE: a deterministic tiny vae/ltx-2.5-audio-vae file as ComfyUI's VAELoader reads an LTX audio
VAE file (nodes/models/ltx2_audio.py): the mel autoencoder under `audio_vae.` with its per-channel statistics, the
vocoder under `vocoder.`, both configs in the metadata `config` JSON. The tensors and configs are ltx2-tiny's
(nodes/models/ltx2_demo.py: HiFi-GAN voicing 16 kHz, a rate AAC can store), so its decode is the one
tests/nodes/test_ltxv_audio.py checks against ComfyUI. bfloat16 like the released file."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from nodes.models.ltx2_demo import AUDIO_CONFIG, SEED, tiny_audio_state_dict
from nodes.output_claims import write_atomic

FILE = "vae/ltx-2.5-audio-vae_tiny.safetensors"


def build(models_dir: Path, seed: int = SEED) -> Path:
    path = Path(models_dir) / FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    sd = {k: v.to(torch.bfloat16).contiguous() for k, v in tiny_audio_state_dict(seed).items()}
    meta = {"config": json.dumps(AUDIO_CONFIG)}
    write_atomic(path, lambda tmp: save_file(sd, tmp, metadata=meta))
    return path
