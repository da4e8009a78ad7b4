"""Whisper audio encoders of models/audio_encoders (ComfyUI's AudioEncoderLoader for HuMo: whisper_large_v3_fp16,
transformers' WhisperModel names, `model.encoder.*`; the decoder half, when the file has one, is not read).

The front end is Whisper's log-mel spectrogram as ComfyUI 0.3.64 computes it with torchaudio (which has no build for
our torch; written here on torch.stft from its documented definitions): channels averaged, every waveform cut or
zero-padded to 30 s at 16 kHz, a power spectrogram (400-sample Hann window, hop 160, centred frames with reflect
padding), Slaney-scaled and area-normalised mel filters from 0 to 8 kHz (one per input channel of the first
convolution: 128 for large-v3), the last frame dropped, log10 of it clamped at 1e-10, floored at 8 below the
largest value of the whole batch, then (x + 4) / 4. The encoder is transformers' WhisperEncoder with the file's
sizes (the heads 64 wide, as in every released Whisper size), its weights rounded to float16 as ComfyUI holds them
and run in float32; `encode` returns the last hidden state (after the final norm) and every layer's input plus that
last state (the embedding's first: 33 for large-v3's 32 layers), as ComfyUI lists them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from transformers import WhisperConfig
from transformers.models.whisper.modeling_whisper import WhisperEncoder

from nodes.models.audio_mel import mel_filterbank
from nodes.models.errors import ModelLoadError
from nodes.models.flux_keys import count_blocks
from nodes.models.safetensors_io import build_module

MARKER = "model.encoder.embed_positions.weight"
PREFIX = "model.encoder."
SAMPLE_RATE = 16000
N_FFT, HOP = 400, 160
CHUNK_SAMPLES = 30 * SAMPLE_RATE  # Whisper reads 30 s windows
F_MAX = 8000.0
HEAD_WIDTH = 64
LOG_FLOOR, LOG_RANGE = 1e-10, 8.0


def is_whisper(keys: Mapping[str, object]) -> bool:
    return MARKER in keys


def log_mel(waveform: torch.Tensor, mels: int) -> torch.Tensor:
    """[B, channels, samples] at 16 kHz -> [B, mels, 3000]: Whisper's normalised log-mel features."""
    audio = waveform.float().mean(dim=1)
    n = audio.shape[-1]
    audio = audio[:, :CHUNK_SAMPLES] if n > CHUNK_SAMPLES else torch.nn.functional.pad(audio, (0, CHUNK_SAMPLES - n))
    spec = torch.stft(
        audio,
        N_FFT,
        hop_length=HOP,
        win_length=N_FFT,
        window=torch.hann_window(N_FFT, dtype=audio.dtype, device=audio.device),
        center=True,
        pad_mode="reflect",
        normalized=False,
        onesided=True,
        return_complex=True,
    )
    power = spec.abs().pow(2.0)
    bank = mel_filterbank(N_FFT // 2 + 1, F_MAX, mels, SAMPLE_RATE).to(power)
    mel = torch.matmul(power.transpose(-1, -2), bank).transpose(-1, -2)[:, :, :-1]
    log = mel.clamp(min=LOG_FLOOR).log10()
    log = torch.maximum(log, log.max() - LOG_RANGE)  # one floor for the whole batch, as ComfyUI takes it
    return (log + 4.0) / 4.0


def whisper_config(sd: Mapping[str, torch.Tensor]) -> WhisperConfig:
    """transformers' config for an unprefixed encoder state dict (conv1, embed_positions, layers.N, layer_norm)."""
    width, mels = (int(v) for v in sd["conv1.weight"].shape[:2])
    return WhisperConfig(
        d_model=width,
        num_mel_bins=mels,
        encoder_layers=count_blocks(sd, "layers"),
        encoder_attention_heads=max(1, width // HEAD_WIDTH),
        encoder_ffn_dim=int(sd["layers.0.fc1.weight"].shape[0]),
        max_source_positions=int(sd["embed_positions.weight"].shape[0]),
        activation_function="gelu",
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        encoder_layerdrop=0.0,
    )


@dataclass
class WhisperAudioEncoder:
    """A loaded Whisper encoder."""

    module: WhisperEncoder
    mels: int
    sample_rate: int = SAMPLE_RATE

    def encode(self, waveform: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """waveform [B, channels, samples] at 16 kHz -> (last hidden state [B, 1500, width], every hidden state
        stacked [layers + 1, B, 1500, width])."""
        device = next(self.module.parameters()).device
        features = log_mel(waveform.to(device, torch.float32), self.mels)
        with torch.no_grad():
            out = self.module(input_features=features, output_hidden_states=True)
        return out.last_hidden_state, torch.stack(out.hidden_states)


def load_whisper_encoder(state_dict: Mapping[str, torch.Tensor], path: str | None) -> WhisperAudioEncoder:
    from nodes.models.audio_encoder import native_conv1d

    sd = {k[len(PREFIX) :]: v.to(torch.float16).float() for k, v in state_dict.items() if k.startswith(PREFIX)}
    try:
        config = whisper_config(sd)
    except KeyError as e:
        raise ModelLoadError(path, f"not a usable Whisper encoder: missing {e}") from None
    config._attn_implementation = "sdpa"
    module = build_module(lambda: WhisperEncoder(config), sd, path, "Whisper audio encoder")
    module.eval()
    for conv in (module.conv1, module.conv2):  # 3000 frames: torch's own 1-D kernel rounds by the thread count
        conv.forward = lambda x, conv=conv: native_conv1d(conv, x)
    return WhisperAudioEncoder(module=module, mels=config.num_mel_bins)
