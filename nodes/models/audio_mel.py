"""Waveform preprocessing of audio encoders that ComfyUI runs through torchaudio (not installable beside our
torch): band-limited resampling (windowed-sinc with a squared-cosine (Hann) window, 6 zero crossings, cut-off at
0.99 of the lower Nyquist rate, torchaudio.functional.resample's defaults) and a magnitude mel spectrogram with the
Slaney mel scale and area normalisation (torchaudio.transforms.MelSpectrogram with mel_scale and norm "slaney").
Written from those documented definitions and checked against torchaudio by the LTX-2 audio encoder's fixture
(tests/nodes/test_ltxv_audio_encode.py)."""

from __future__ import annotations

import math

import torch

_ZERO_CROSSINGS, _ROLLOFF = 6, 0.99
# Slaney's mel scale: linear below 1 kHz (200/3 Hz per mel), logarithmic above (27 mels per factor 6.4)
_LINEAR_HZ_PER_MEL, _BREAK_HZ, _LOG_STEP = 200.0 / 3.0, 1000.0, math.log(6.4) / 27.0
_BREAK_MEL = _BREAK_HZ / _LINEAR_HZ_PER_MEL


def resample(waveform: torch.Tensor, source_rate: int, target_rate: int) -> torch.Tensor:
    """[..., samples] at source_rate -> [..., ceil(samples * target / source)] at target_rate."""
    if source_rate == target_rate:
        return waveform
    g = math.gcd(int(source_rate), int(target_rate))
    orig, new = int(source_rate) // g, int(target_rate) // g
    cutoff = min(orig, new) * _ROLLOFF
    width = math.ceil(_ZERO_CROSSINGS * orig / cutoff)
    # one filter per output phase j: taps at input offsets -width .. width + orig - 1, time in input samples
    dtype = waveform.dtype  # the filters are computed in the waveform's precision, as torchaudio does
    taps = torch.arange(-width, width + orig, dtype=dtype)[None, None] / orig
    phases = torch.arange(0, -new, -1, dtype=dtype)[:, None, None] / new
    t = ((phases + taps) * cutoff).clamp(-_ZERO_CROSSINGS, _ZERO_CROSSINGS)
    window = torch.cos(t * math.pi / _ZERO_CROSSINGS / 2) ** 2
    t = t * math.pi
    sinc = torch.where(t == 0, torch.ones_like(t), torch.sin(t) / t)
    kernels = sinc * window * (cutoff / orig)
    shape, length = waveform.shape, waveform.shape[-1]
    flat = torch.nn.functional.pad(waveform.reshape(-1, 1, length), (width, width + orig))
    out = torch.nn.functional.conv1d(flat, kernels, stride=orig).transpose(1, 2).reshape(flat.shape[0], -1)
    return out[:, : math.ceil(new * length / orig)].reshape(*shape[:-1], -1)


def _hz_to_mel(hz: torch.Tensor) -> torch.Tensor:
    mel = hz / _LINEAR_HZ_PER_MEL
    return torch.where(hz >= _BREAK_HZ, _BREAK_MEL + torch.log(hz / _BREAK_HZ) / _LOG_STEP, mel)


def _mel_to_hz(mel: torch.Tensor) -> torch.Tensor:
    hz = mel * _LINEAR_HZ_PER_MEL
    return torch.where(mel >= _BREAK_MEL, _BREAK_HZ * torch.exp(_LOG_STEP * (mel - _BREAK_MEL)), hz)


def mel_filterbank(n_freqs: int, f_max: float, n_mels: int, sample_rate: int) -> torch.Tensor:
    """[n_freqs, n_mels] triangular filters from 0 Hz to f_max, equally spaced in Slaney mels, each scaled to
    unit area (2 / its bandwidth in Hz)."""
    freqs = torch.linspace(0, sample_rate // 2, n_freqs)
    edges = torch.tensor([0.0, float(f_max)], dtype=torch.float64)
    lo, hi = _hz_to_mel(edges).tolist()
    points = _mel_to_hz(torch.linspace(lo, hi, n_mels + 2))
    gaps = points[1:] - points[:-1]
    slopes = points.unsqueeze(0) - freqs.unsqueeze(1)
    rising, falling = -slopes[:, :-2] / gaps[:-1], slopes[:, 2:] / gaps[1:]
    bank = torch.clamp(torch.minimum(rising, falling), min=0)
    return bank * (2.0 / (points[2 : n_mels + 2] - points[:n_mels])).unsqueeze(0)


def log_mel(waveform: torch.Tensor, sample_rate: int, n_fft: int, hop_length: int, mel_bins: int) -> torch.Tensor:
    """[B, C, samples] -> [B, C, frames, mel_bins]: log of the clamped (1e-5) magnitude mel spectrogram, Hann
    window of n_fft, centred frames with reflect padding, 0 Hz to Nyquist."""
    b, c, n = waveform.shape
    spec = torch.stft(
        waveform.reshape(-1, n),
        n_fft,
        hop_length=hop_length,
        win_length=n_fft,
        window=torch.hann_window(n_fft, dtype=waveform.dtype, device=waveform.device),
        center=True,
        pad_mode="reflect",
        normalized=False,
        onesided=True,
        return_complex=True,
    ).abs()
    bank = mel_filterbank(n_fft // 2 + 1, sample_rate / 2.0, mel_bins, sample_rate).to(spec)
    mel = torch.matmul(spec.transpose(-1, -2), bank)  # [B*C, frames, mel_bins]
    return torch.log(torch.clamp(mel, min=1e-5)).reshape(b, c, -1, mel_bins)
