"""ltx2.5-tiny audio VAE: a deterministic tiny vae/ltx-2.5-audio-vae file as ComfyUI's VAELoader reads an LTX audio
VAE file (nodes/models/ltx2_audio.py): the mel autoencoder under `audio_vae.` with its per-channel statistics (ltx2-tiny's,
nodes/models/ltx2_demo.py, whose decode tests/nodes/test_ltxv_audio.py checks against ComfyUI) and LTX-2.3 / 2.5's
vocoder with bandwidth extension under `vocoder.` (nodes/models/ltx2_bwe_vocoder.py: BigVGAN's AMP1 at 16 kHz, its
causal STFT bases and mel filterbank, the extension to 48 kHz, a rate AAC can store) at tiny widths, both configs in
the metadata `config` JSON in ComfyUI's names. bfloat16 like the released file; same seed -> byte-identical file."""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch
from safetensors.torch import save_file

from nodes.models.audio_mel import mel_filterbank
from nodes.models.flux_demo import randomize_constants
from nodes.models.ltx2_bwe_vocoder import NAMES, BWEVocoder
from nodes.models.ltx2_demo import AUDIO_CONFIG, SEED, tiny_audio_state_dict
from nodes.output_claims import write_atomic

FILE = "vae/ltx-2.5-audio-vae_tiny.safetensors"
_BIGVGAN = {
    "resblock": "AMP1",
    "activation": "snakebeta",
    "resblock_kernel_sizes": [3, 7],
    "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5]],
    "stereo": True,
    "use_bias_at_final": False,
}
VOCODER_CONFIG = {
    # 160 samples per mel frame at 16 kHz, as the autoencoder's hop
    "vocoder": {
        **_BIGVGAN,
        "upsample_rates": [5, 4, 4, 2],
        "upsample_kernel_sizes": [10, 8, 8, 4],
        "upsample_initial_channel": 32,
        "use_tanh_at_final": False,
    },
    # 240 samples at 48 kHz per 80-sample hop at 16 kHz
    "bwe": {
        **_BIGVGAN,
        "upsample_rates": [6, 5, 2, 2, 2],
        "upsample_kernel_sizes": [12, 11, 4, 4, 4],
        "upsample_initial_channel": 64,
        "input_sampling_rate": 16000,
        "output_sampling_rate": 48000,
        "hop_length": 80,
        "n_fft": 512,
        "num_mels": 64,
    },
}


def _stft_bases(n_fft: int) -> torch.Tensor:
    """The causal STFT's forward bases: the DFT's cosine then negated sine rows times a periodic Hann window."""
    t = torch.arange(n_fft, dtype=torch.float64)
    k = torch.arange(n_fft // 2 + 1, dtype=torch.float64).unsqueeze(1)
    window = torch.hann_window(n_fft, periodic=True, dtype=torch.float64)
    angle = 2 * math.pi * k * t / n_fft
    return torch.cat([torch.cos(angle), -torch.sin(angle)]).mul(window).unsqueeze(1).float()


def tiny_vocoder_state_dict(seed: int = SEED) -> dict[str, torch.Tensor]:
    """The vocoder's tensors in ComfyUI's names under `vocoder.`."""
    bwe = VOCODER_CONFIG["bwe"]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + 5)
        gen = torch.Generator().manual_seed(seed + 5)
        module = BWEVocoder(VOCODER_CONFIG)
        randomize_constants(module, gen)
        with torch.no_grad():
            for name, p in module.named_parameters():
                if name.endswith((".alpha", ".beta")):  # SnakeBeta's log-scale parameters near 0
                    p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            module.mel_stft.stft_fn.forward_basis.copy_(_stft_bases(bwe["n_fft"]))
            module.mel_stft.stft_fn.inverse_basis.copy_(_stft_bases(bwe["n_fft"]))
            bank = mel_filterbank(bwe["n_fft"] // 2 + 1, bwe["input_sampling_rate"] / 2, bwe["num_mels"], 16000)
            module.mel_stft.mel_basis.copy_(bank.T.float())
        sd = module.state_dict()
    out = {}
    for key, value in sd.items():
        side, name = key.split(".", 1)
        if side in ("vocoder", "bwe_generator"):
            for theirs, ours in NAMES:
                if name.startswith(ours):
                    name = theirs + name[len(ours) :]
                    break
            name = name.replace(".downsample.filter", ".downsample.lowpass.filter")
        out[f"vocoder.{side}.{name}"] = value
    return out


def build(models_dir: Path, seed: int = SEED) -> Path:
    path = Path(models_dir) / FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    sd = {k: v for k, v in tiny_audio_state_dict(seed).items() if not k.startswith("vocoder.")}
    sd.update(tiny_vocoder_state_dict(seed))
    sd = {k: v.to(torch.bfloat16).contiguous() for k, v in sd.items()}
    meta = {"config": json.dumps({"audio_vae": AUDIO_CONFIG["audio_vae"], "vocoder": VOCODER_CONFIG})}
    write_atomic(path, lambda tmp: save_file(sd, tmp, metadata=meta))
    return path
