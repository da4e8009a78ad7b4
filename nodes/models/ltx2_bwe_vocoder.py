"""LTX-2.3 / 2.5's vocoder with bandwidth extension (the audio VAE files' `vocoder.*` when its config has a "bwe"
section): a BigVGAN v2 vocoder (anti-aliased SnakeBeta resblocks, "AMP1") voices the mel spectrogram at the mel rate
(`vocoder.vocoder.*`), a causal log-mel spectrogram of that waveform (`vocoder.mel_stft.*`: its DFT x Hann bases and
mel filterbank stored in the file) drives a second BigVGAN (`vocoder.bwe_generator.*`) whose output is added to the
waveform resampled by a Hann-windowed sinc (the output rate over the input rate), clamped to [-1, 1] and cut to the
input's length at the output rate. Rules and names as ComfyUI's comfy/ldm/lightricks/vocoders/vocoder.py
(VocoderWithBWE, Comfy-Org/ComfyUI 8ce4c98d): its config keys (the base vocoder's under "vocoder", the extension's
under "bwe"), a final tanh (or clamp) on the base vocoder unless the config turns it off, none on the extension.
The layers are diffusers' LTX-2 vocoder blocks, driven in that order here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
from diffusers.pipelines.ltx2.vocoder import LTX2Vocoder, MelSTFT, UpSample1d

from nodes.models.errors import ModelLoadError

# ComfyUI's vocoder names -> diffusers' (the anti-aliased activations' low-pass filter sits one level deeper there)
NAMES = (
    ("conv_pre.", "conv_in."),
    ("conv_post.", "conv_out."),
    ("ups.", "upsamplers."),
    ("resblocks.", "resnets."),
    ("act_post.", "act_out."),
)


def is_bwe(config: Mapping[str, Any]) -> bool:
    return "bwe" in config


def vocoder_kwargs(config: Mapping[str, Any], final_activation: bool, path: str | None) -> dict[str, Any]:
    """diffusers' LTX2Vocoder arguments for one of ComfyUI's Vocoder configs (BigVGAN's AMP1 resblocks)."""
    if config.get("resblock", "1") != "AMP1" or config.get("activation", "snake") != "snakebeta":
        raise ModelLoadError(
            path,
            "LTX audio VAE: the bandwidth-extension vocoder's networks are supported with BigVGAN's AMP1 resblocks "
            f"and SnakeBeta only (this file has resblock {config.get('resblock', '1')!r}, activation "
            f"{config.get('activation', 'snake')!r})",
        )
    stereo = config.get("stereo", True)
    final = None
    if final_activation and config.get("apply_final_activation", True):
        final = "tanh" if config.get("use_tanh_at_final", True) else "clamp"
    return {
        "in_channels": 128 if stereo else 64,  # ComfyUI's Vocoder: 64 mel bins per channel
        "hidden_channels": config.get("upsample_initial_channel", 1024),
        "out_channels": 2 if stereo else 1,
        "upsample_kernel_sizes": list(config.get("upsample_kernel_sizes", [16, 16, 8, 4, 4])),
        "upsample_factors": list(config.get("upsample_rates", [5, 4, 2, 2, 2])),
        "resnet_kernel_sizes": list(config.get("resblock_kernel_sizes", [3, 7, 11])),
        "resnet_dilations": [list(d) for d in config.get("resblock_dilation_sizes", [[1, 3, 5]] * 3)],
        "act_fn": "snakebeta",
        "antialias": True,
        "final_act_fn": final,
        "final_bias": config.get("use_bias_at_final", True),
    }


def diffusers_key(key: str) -> str:
    """ComfyUI's name of a VocoderWithBWE tensor (`vocoder.*`, `bwe_generator.*`, `mel_stft.*`) -> this module's."""
    side, _, name = key.partition(".")
    for theirs, ours in NAMES:
        if name.startswith(theirs):
            name = ours + name[len(theirs) :]
            break
    return f"{side}.{name}".replace(".downsample.lowpass.filter", ".downsample.filter")


class BWEVocoder(torch.nn.Module):
    def __init__(self, config: Mapping[str, Any], path: str | None = None) -> None:
        super().__init__()
        bwe = config["bwe"]
        self.vocoder = LTX2Vocoder(**vocoder_kwargs(config["vocoder"], True, path))
        self.bwe_generator = LTX2Vocoder(**vocoder_kwargs(bwe, False, path))
        self.input_rate, self.output_rate = int(bwe["input_sampling_rate"]), int(bwe["output_sampling_rate"])
        self.hop_length = int(bwe["hop_length"])
        self.mel_stft = MelSTFT(bwe["n_fft"], self.hop_length, bwe["n_fft"], bwe["num_mels"])
        self.resampler = UpSample1d(ratio=self.output_rate // self.input_rate, window_type="hann", persistent=False)

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        """[B, 2, frames, mel bins] -> [B, 2, samples at the output rate]."""
        x = self.vocoder(mel)
        b, c, samples = x.shape
        if samples % self.hop_length:
            x = F.pad(x, (0, self.hop_length - samples % self.hop_length))
        bwe_mel = self.mel_stft(x.reshape(b * c, -1))[0]
        residual = self.bwe_generator(bwe_mel.reshape(b, c, *bwe_mel.shape[1:]), time_last=True)
        out = torch.clamp(residual + self.resampler(x), -1, 1)
        return out[..., : samples * self.output_rate // self.input_rate]


def load_bwe_vocoder(config: Mapping[str, Any], sd: Mapping[str, torch.Tensor], path: str | None) -> BWEVocoder:
    """The vocoder of `sd` (ComfyUI's names without `vocoder.`). The anti-aliasing filters are fixed by the config:
    a file that leaves them out gets the computed ones."""
    module = BWEVocoder(config, path)
    converted = {diffusers_key(k): v for k, v in sd.items()}
    expected = module.state_dict()
    converted.update({k: v for k, v in expected.items() if k.endswith(".filter") and k not in converted})
    missing = sorted(set(expected) - set(converted))
    unexpected = sorted(set(converted) - set(expected))
    if missing or unexpected:
        raise ModelLoadError(
            path,
            f"LTX audio VAE: the bandwidth-extension vocoder does not match its config (missing {missing[:5]}, "
            f"unexpected {unexpected[:5]})",
        )
    module.load_state_dict(converted)
    return module.float().eval()
