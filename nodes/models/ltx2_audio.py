"""LTX-2's audio VAE as published (Lightricks' LTX-2 checkpoints and ComfyUI's split audio VAE files): the mel
autoencoder under `audio_vae.` (its per-channel latent statistics as `audio_vae.per_channel_statistics.
{mean,std}-of-means`), the HiFi-GAN vocoder under `vocoder.`, and both configs as JSON in the safetensors
metadata's "config" ({"audio_vae": {...}, "vocoder": {...}}). Key source: ComfyUI's
comfy/ldm/lightricks/vae/audio_vae.py and causal_audio_autoencoder.py, vocoders/vocoder.py (0.10.0) and
diffusers 0.42's convert_ltx2_audio_vae_to_diffusers.

The networks run on diffusers' AutoencoderKLLTX2Audio and LTX2Vocoder; decoding follows ComfyUI's AudioVAE.decode:
the latent is de-normalised per (channel x frequency) feature, decoded to a stereo mel spectrogram of
4 * frames - 3 frames (causal), and voiced: LTX-2.0's HiFi-GAN vocoder, or LTX-2.3 / 2.5's with bandwidth extension
(nodes/models/ltx2_bwe_vocoder.py)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import torch
from diffusers import AutoencoderKLLTX2Audio
from diffusers.pipelines.ltx2.vocoder import LTX2Vocoder

from nodes.models.errors import ModelLoadError
from nodes.models.ltx2_bwe_vocoder import is_bwe, load_bwe_vocoder

AUDIO_VAE_PREFIX, VOCODER_PREFIX = "audio_vae.", "vocoder."
MARKER = "audio_vae.decoder.conv_in.conv.weight"
STATS = ("audio_vae.per_channel_statistics.mean-of-means", "audio_vae.per_channel_statistics.std-of-means")
DOWNSAMPLE = 4  # mel frames per audio latent frame (and mel bins per latent frequency bin)
# ComfyUI's vocoder names -> diffusers' LTX2Vocoder names
VOCODER_NAMES = (
    ("conv_pre.", "conv_in."),
    ("conv_post.", "conv_out."),
    ("ups.", "upsamplers."),
    ("resblocks.", "resnets."),
)


class _MelDecoder(torch.nn.Module):
    def __init__(self, autoencoder: AutoencoderKLLTX2Audio) -> None:
        super().__init__()
        self.autoencoder = autoencoder

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.autoencoder.decode(z).sample


class _MelEncoder(torch.nn.Module):
    def __init__(self, autoencoder: AutoencoderKLLTX2Audio) -> None:
        super().__init__()
        self.autoencoder = autoencoder

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        return self.autoencoder.encode(mel).latent_dist.mode()


class LTX2AudioVAE(torch.nn.Module):
    """The decoder and the vocoder as the two stages of one ModuleList, each run through its own __call__: the
    executor's layer cache binds a stage's weights in its forward pre-hook (a method such as decode() bypasses
    the hook and would read unbound weights)."""

    def __init__(
        self,
        autoencoder: AutoencoderKLLTX2Audio,
        vocoder: torch.nn.Module,
        mean: torch.Tensor,
        std: torch.Tensor,
        sample_rate: int,
        hop_length: int,
        mel_bins: int,
        latent_channels: int,
        output_sample_rate: int,
    ) -> None:
        super().__init__()
        # the encoder stage shares the autoencoder (its encoder half) with the decoder stage
        self.stages = torch.nn.ModuleList([_MelDecoder(autoencoder), vocoder, _MelEncoder(autoencoder)])
        self.mean, self.std = mean, std  # [channels * frequency bins]; plain tensors, not weights
        self.sample_rate, self.hop_length, self.mel_bins = sample_rate, hop_length, mel_bins
        self.latent_channels, self.output_sample_rate = latent_channels, output_sample_rate

    @property
    def latents_per_second(self) -> float:
        return self.sample_rate / self.hop_length / DOWNSAMPLE

    def latent_frames(self, video_frames: int, frame_rate: int) -> int:
        return latent_frames(video_frames, frame_rate, self.sample_rate, self.hop_length)

    @torch.no_grad()
    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        """[B, C, T, F] normalised latents -> [B, 2, samples] waveform at output_sample_rate."""
        b, c, t, f = latents.shape
        if c != self.latent_channels or c * f != self.mean.numel():
            raise ValueError(
                f"samples: an audio latent of {self.latent_channels} channels x "
                f"{self.mean.numel() // self.latent_channels} frequency bins was expected, got {c} x {f}"
            )
        flat = latents.float().permute(0, 2, 1, 3).reshape(b, t, c * f) * self.std + self.mean
        z = flat.reshape(b, t, c, f).permute(0, 2, 1, 3)
        mel = self.stages[0](z)  # [B, 2, 4T - 3, mel]
        return self.stages[1](mel)

    @torch.no_grad()
    def encode(self, mel: torch.Tensor) -> torch.Tensor:
        """[B, 2, frames, mel_bins] log-mel spectrogram -> [B, C, T, F] normalised latents (the posterior's
        mode, as ComfyUI's AudioVAE.encode)."""
        if mel.ndim != 4 or mel.shape[-1] != self.mel_bins:
            raise ValueError(f"a [batch, channels, frames, {self.mel_bins}] mel spectrogram was expected")
        z = self.stages[2](mel.float())
        b, c, t, f = z.shape
        flat = (z.permute(0, 2, 1, 3).reshape(b, t, c * f) - self.mean) / self.std
        return flat.reshape(b, t, c, f).permute(0, 2, 1, 3).contiguous()


def latent_frames(video_frames: int, frame_rate: int, sample_rate: int, hop_length: int) -> int:
    """Audio latent frames covering `video_frames` at `frame_rate` (rounded up, as ComfyUI)."""
    return math.ceil(video_frames / frame_rate * (sample_rate / hop_length / DOWNSAMPLE))


def is_audio_vae(keys: Mapping[str, Any] | set[str]) -> bool:
    return MARKER in keys


def _config(metadata: Mapping[str, str] | None, path: str | None) -> tuple[dict, dict]:
    raw = (metadata or {}).get("config")
    if raw is None:
        raise ModelLoadError(
            path,
            "LTX-2 audio VAE: the file's metadata has no 'config' (the published files carry the "
            "audio_vae and vocoder configs there)",
        )
    parsed = json.loads(raw) if isinstance(raw, str) else raw
    if "audio_vae" not in parsed or "vocoder" not in parsed:
        raise ModelLoadError(path, "LTX-2 audio VAE: the metadata config lacks its 'audio_vae' or 'vocoder' section")
    return parsed["audio_vae"], parsed["vocoder"]


def autoencoder_kwargs(config: dict, path: str | None) -> tuple[dict[str, Any], int, int]:
    """diffusers kwargs, sample rate and hop length from the published autoencoder config (ComfyUI's reading:
    model.params.encoder or .ddconfig, the decoder's own section if any, the STFT hop under preprocessing)."""
    params = config.get("model", {}).get("params", {})
    enc = params.get("encoder", params.get("ddconfig", {}))
    dec = params.get("decoder", enc)
    sample_rate = config.get("variables", {}).get(
        "sampling_rate", params.get("sampling_rate", config.get("sampling_rate", 16000))
    )
    hop = params.get("preprocessing", {}).get("stft", {}).get("hop_length", 160)
    if enc.get("attn_resolutions") or enc.get("mid_block_add_attention", False):
        raise ModelLoadError(path, "LTX-2 audio VAE: attention layers in the autoencoder are not supported")
    kwargs = {
        "base_channels": enc.get("ch", 128),
        "output_channels": dec.get("out_ch", 2),
        "ch_mult": tuple(enc.get("ch_mult", (1, 2, 4))),
        "num_res_blocks": enc.get("num_res_blocks", 2),
        "attn_resolutions": None,
        "in_channels": enc.get("in_channels", 2),
        "resolution": enc.get("resolution", 256),
        "latent_channels": enc.get("z_channels", 8),
        "norm_type": enc.get("norm_type", "group"),
        "causality_axis": enc.get("causality_axis", "width"),
        "mid_block_add_attention": False,
        "sample_rate": sample_rate,
        "mel_hop_length": hop,
        "is_causal": enc.get("causality_axis", "width") == "height",
        "mel_bins": enc.get("mel_bins", 64),
        "double_z": enc.get("double_z", True),
    }
    return kwargs, int(sample_rate), int(hop)


def vocoder_kwargs(config: dict, mel_bins: int, path: str | None) -> dict[str, Any]:
    if config.get("resblock", "1") != "1":
        raise ModelLoadError(
            path,
            "LTX-2 audio VAE: a vocoder without bandwidth extension is supported as LTX-2.0's HiFi-GAN (resblock "
            f"'1') only; this file's has resblock {config.get('resblock')!r}",
        )
    stereo = config.get("stereo", True)
    return {
        "in_channels": mel_bins * (2 if stereo else 1),
        "hidden_channels": config.get("upsample_initial_channel", 1024),
        "out_channels": 2 if stereo else 1,
        "upsample_kernel_sizes": list(config.get("upsample_kernel_sizes", [16, 15, 8, 4, 4])),
        "upsample_factors": list(config.get("upsample_rates", [6, 5, 2, 2, 2])),
        "resnet_kernel_sizes": list(config.get("resblock_kernel_sizes", [3, 7, 11])),
        "resnet_dilations": [list(d) for d in config.get("resblock_dilation_sizes", [[1, 3, 5]] * 3)],
        "output_sampling_rate": config.get("output_sample_rate") or 24000,
    }


def _vocoder_key(key: str) -> str:
    for old, new in VOCODER_NAMES:
        if key.startswith(old):
            return new + key[len(old) :]
    return key


def _load(module: torch.nn.Module, sd: dict[str, torch.Tensor], what: str, path: str | None) -> None:
    missing, unexpected = module.load_state_dict(sd, strict=False)
    if missing or unexpected:
        raise ModelLoadError(
            path,
            f"LTX-2 audio VAE: the {what} does not match its config (missing {sorted(missing)[:5]}, "
            f"unexpected {sorted(unexpected)[:5]})",
        )


def load_audio_vae(
    state_dict: Mapping[str, torch.Tensor], metadata: Mapping[str, str] | None, path: str | None = None
) -> LTX2AudioVAE:
    """The audio VAE of a published LTX-2 file (a whole checkpoint or the split audio VAE file)."""
    if not is_audio_vae(state_dict):
        raise ModelLoadError(path, f"not an LTX-2 audio VAE: no {MARKER}")
    ae_config, voc_config = _config(metadata, path)
    ae_kwargs, sample_rate, hop = autoencoder_kwargs(ae_config, path)
    mel_bins = ae_kwargs["mel_bins"]
    ae_sd = {
        k[len(AUDIO_VAE_PREFIX) :]: v
        for k, v in state_dict.items()
        if k.startswith(AUDIO_VAE_PREFIX) and k not in STATS
    }
    missing = [k for k in STATS if k not in state_dict]
    if missing:
        raise ModelLoadError(path, f"LTX-2 audio VAE: missing {', '.join(missing)}")
    autoencoder = AutoencoderKLLTX2Audio(**ae_kwargs)
    voc_sd = {k[len(VOCODER_PREFIX) :]: v for k, v in state_dict.items() if k.startswith(VOCODER_PREFIX)}
    if is_bwe(voc_config):  # LTX-2.3 / 2.5's vocoder with bandwidth extension
        vocoder = load_bwe_vocoder(voc_config, voc_sd, path)
    else:
        vocoder = LTX2Vocoder(**vocoder_kwargs(voc_config, mel_bins, path))
        _load(vocoder, {_vocoder_key(k): v for k, v in voc_sd.items()}, "vocoder", path)
    # diffusers also keeps the statistics on the autoencoder (sized base_channels, for its pipelines); decoding here
    # applies the file's own (channels x frequency bins) statistics, so the autoencoder keeps its identity ones.
    ae_sd = {**ae_sd, "latents_mean": autoencoder.latents_mean, "latents_std": autoencoder.latents_std}
    _load(autoencoder, ae_sd, "autoencoder", path)
    mean, std = state_dict[STATS[0]].float(), state_dict[STATS[1]].float()
    return LTX2AudioVAE(
        autoencoder.float(),
        vocoder.float(),
        mean,
        std,
        sample_rate,
        hop,
        mel_bins,
        ae_kwargs["latent_channels"],
        _output_rate(voc_config, sample_rate, hop),
    ).eval()


def read_config(path: str) -> dict[str, Any]:
    """What the head needs to size audio latents, from the file's header alone: latent channels, frequency bins,
    sample rate and hop length (ComfyUI's reading of the metadata config)."""
    from safetensors import safe_open

    with safe_open(path, "pt") as f:
        metadata, keys = f.metadata(), set(f.keys())
    if not is_audio_vae(keys):
        raise ModelLoadError(path, f"not an LTX-2 audio VAE (no {MARKER})")
    ae_config, voc_config = _config(metadata, path)
    ae_kwargs, sample_rate, hop = autoencoder_kwargs(ae_config, path)
    return {
        "latent_channels": ae_kwargs["latent_channels"],
        "frequency_bins": ae_kwargs["mel_bins"] // DOWNSAMPLE,
        "sample_rate": sample_rate,
        "hop_length": hop,
        "output_sample_rate": _output_rate(voc_config, sample_rate, hop),
        "n_fft": int(n_fft(ae_config)),
        "mel_bins": ae_kwargs["mel_bins"],
    }


def n_fft(config: dict) -> int:
    """The encoder's STFT size (ComfyUI: preprocessing.stft.filter_length, 1024 where absent)."""
    return config.get("model", {}).get("params", {}).get("preprocessing", {}).get("stft", {}).get("filter_length", 1024)


def _output_rate(vocoder_config: dict, sample_rate: int, hop: int) -> int:
    """The vocoder's declared output rate, else the mel rate times its upsampling (ComfyUI's fallback)."""
    if is_bwe(vocoder_config):
        return int(vocoder_config["bwe"]["output_sampling_rate"])
    declared = vocoder_config.get("output_sample_rate")
    if declared:
        return int(declared)
    return int(sample_rate * math.prod(vocoder_config.get("upsample_rates", [6, 5, 2, 2, 2])) / hop)


def read_audio_vae(path: str) -> LTX2AudioVAE:
    from safetensors import safe_open
    from safetensors.torch import load_file

    with safe_open(path, "pt") as f:
        metadata = f.metadata()
    return load_audio_vae(load_file(path), metadata, path)
