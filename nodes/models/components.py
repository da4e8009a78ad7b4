"""The loaded-model types the ModelFns run. Each wraps a torch module behind ComfyUI's conventions,
so that the samplers and nodes never see diffusers' or transformers' calling conventions.

Tensor conventions (ComfyUI's): IMAGE [B,H,W,C] float 0..1; raw VAE latents [B,C,H/8,W/8]
(unscaled, as LATENT["samples"] holds them); the diffusion model sees `latent_format.process_in(x)`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from nodes.models.batch_invariant import make_batch_invariant


@dataclass(frozen=True)
class LatentFormat:
    channels: int
    scale_factor: float
    shift_factor: float = 0.0

    def process_in(self, latent: torch.Tensor) -> torch.Tensor:
        return (latent - self.shift_factor) * self.scale_factor

    def process_out(self, latent: torch.Tensor) -> torch.Tensor:
        return latent / self.scale_factor + self.shift_factor


@dataclass(frozen=True)
class NormalizedLatentFormat(LatentFormat):
    """A format that also standardises each channel: (latent - mean) * scale_factor / std."""

    latents_mean: tuple[float, ...] = ()
    latents_std: tuple[float, ...] = ()

    def _stats(self, latent: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        shape = (1, -1) + (1,) * (latent.dim() - 2)  # [B,C,H,W], or [B,C,T,H,W] with a frame axis
        mean = torch.tensor(self.latents_mean).view(shape).to(latent.device, latent.dtype)
        std = torch.tensor(self.latents_std).view(shape).to(latent.device, latent.dtype)
        return mean, std

    def process_in(self, latent: torch.Tensor) -> torch.Tensor:
        mean, std = self._stats(latent)
        return (latent - mean) * self.scale_factor / std

    def process_out(self, latent: torch.Tensor) -> torch.Tensor:
        mean, std = self._stats(latent)
        return latent * std / self.scale_factor + mean


SD1_LATENT = LatentFormat(4, 0.18215)
SDXL_LATENT = LatentFormat(4, 0.13025)
SD3_LATENT = LatentFormat(16, 1.5305, 0.0609)
FLUX_LATENT = LatentFormat(16, 0.3611, 0.1159)
# FLUX.2: 128 channels (the VAE's 32 channels x 2x2 patches, standardised by the VAE itself), no scaling.
FLUX2_LATENT = LatentFormat(128, 1.0)
# Playground v2.5's SDXL latents, standardised per channel (the statistics its authors published).
PLAYGROUND_2_5_LATENT = NormalizedLatentFormat(
    4, 0.5, 0.0, (-1.6574, 1.886, -1.383, 2.5155), (8.4927, 5.9022, 6.5498, 5.2299)
)
# The Wan 2.1 VAE's latents (Qwen-Image), standardised per channel with the statistics Wan's authors published
# (diffusers' AutoencoderKLQwenImage carries the same defaults; tests/models/test_qwen_image.py compares them).
WAN21_LATENT = NormalizedLatentFormat(
    16,
    1.0,
    0.0,
    (
        -0.7571,
        -0.7089,
        -0.9113,
        0.1075,
        -0.1745,
        0.9653,
        -0.1517,
        1.5508,
        0.4134,
        -0.0715,
        0.5517,
        -0.3632,
        -0.1922,
        -0.9497,
        0.2503,
        -0.2921,
    ),
    (
        2.8184,
        1.4541,
        2.3275,
        2.6558,
        1.2196,
        1.7708,
        2.6052,
        2.0743,
        3.2687,
        2.1526,
        2.8652,
        1.5579,
        1.6382,
        1.1253,
        2.8251,
        1.9160,
    ),
)

# The Wan 2.2 VAE's 48-channel latents (Wan 2.2 5B), standardised with the statistics Wan's authors published
# for that VAE (ComfyUI's latent format Wan22 uses the same).
WAN22_LATENT = NormalizedLatentFormat(
    48,
    1.0,
    0.0,
    (
        -0.2289,
        -0.0052,
        -0.1323,
        -0.2339,
        -0.2799,
        0.0174,
        0.1838,
        0.1557,
        -0.1382,
        0.0542,
        0.2813,
        0.0891,
        0.1570,
        -0.0098,
        0.0375,
        -0.1825,
        -0.2246,
        -0.1207,
        -0.0698,
        0.5109,
        0.2665,
        -0.2108,
        -0.2158,
        0.2502,
        -0.2055,
        -0.0322,
        0.1109,
        0.1567,
        -0.0729,
        0.0899,
        -0.2799,
        -0.1230,
        -0.0313,
        -0.1649,
        0.0117,
        0.0723,
        -0.2839,
        -0.2083,
        -0.0520,
        0.3748,
        0.0152,
        0.1957,
        0.1433,
        -0.2944,
        0.3573,
        -0.0548,
        -0.1681,
        -0.0667,
    ),
    (
        0.4765,
        1.0364,
        0.4514,
        1.1677,
        0.5313,
        0.4990,
        0.4818,
        0.5013,
        0.8158,
        1.0344,
        0.5894,
        1.0901,
        0.6885,
        0.6165,
        0.8454,
        0.4978,
        0.5759,
        0.3523,
        0.7135,
        0.6804,
        0.5833,
        1.4146,
        0.8986,
        0.5659,
        0.7069,
        0.5338,
        0.4889,
        0.4917,
        0.4069,
        0.4999,
        0.6866,
        0.4093,
        0.5709,
        0.6065,
        0.6415,
        0.4944,
        0.5726,
        1.2042,
        0.5458,
        1.6887,
        0.3971,
        1.0600,
        0.3943,
        0.5537,
        0.5444,
        0.4089,
        0.7468,
        0.7744,
    ),
)

# Qwen-Image 2.1's 64-channel latents (16x VAE), standardised with the statistics its authors published
# (diffusers' AutoencoderKLQwenImage21 defaults, which its pipeline applies; tests/models/test_qwen_image21.py).
QWEN_IMAGE21_LATENT = NormalizedLatentFormat(
    64,
    1.0,
    0.0,
    (
        0.5126,
        0.7721,
        -0.0631,
        1.3506,
        -0.7855,
        -2.1025,
        -0.3458,
        1.3722,
        1.8873,
        -1.7177,
        -0.651,
        0.2732,
        0.7562,
        -0.6163,
        -1.0277,
        3.8363,
        2.021,
        0.0472,
        0.932,
        2.0087,
        2.4954,
        -0.1391,
        -1.4249,
        1.8464,
        -0.5236,
        1.2826,
        3.7046,
        -1.3035,
        2.7286,
        -1.4518,
        -1.9036,
        -1.9955,
        -0.0342,
        -1.0265,
        -0.7636,
        3.0555,
        0.0746,
        -3.0751,
        -0.1076,
        1.7376,
        -1.0914,
        -1.9435,
        -0.2784,
        -1.368,
        0.4809,
        -0.4433,
        0.3764,
        0.5729,
        -2.0595,
        1.096,
        -1.326,
        -2.0211,
        -5.0179,
        0.5275,
        4.0162,
        1.8505,
        0.3026,
        1.9373,
        1.4937,
        0.2632,
        0.5547,
        -1.7121,
        -0.1562,
        0.0304,
    ),
    (
        3.2001,
        3.2936,
        3.4321,
        3.0091,
        3.1061,
        4.0379,
        4.0705,
        3.791,
        3.0785,
        3.65,
        3.9308,
        3.0904,
        2.8778,
        3.7675,
        3.732,
        5.0756,
        3.2864,
        4.0397,
        3.1317,
        4.0443,
        2.9249,
        3.9454,
        3.0988,
        4.2489,
        3.4896,
        3.8513,
        3.9323,
        3.4719,
        3.7498,
        4.283,
        3.5694,
        4.2467,
        3.9037,
        3.2947,
        5.077,
        3.5075,
        3.27,
        3.4767,
        2.8063,
        5.1125,
        3.5327,
        4.7833,
        3.1286,
        4.1819,
        3.8527,
        3.8312,
        3.5605,
        4.3875,
        3.9624,
        4.0168,
        3.5643,
        4.055,
        5.5614,
        4.2963,
        4.408,
        3.4959,
        3.8747,
        3.7608,
        3.5735,
        3.149,
        3.7662,
        3.6746,
        3.4563,
        3.8161,
    ),
)


@dataclass
class DiffusionModel:
    """A denoiser network. `sampling` configures nodes.sampling.model_sampling for it:
    {"kind": "discrete", "prediction": "eps"|"v", "beta_schedule": ..., "linear_start": ..., "linear_end": ...,
     "timesteps": 1000, "zsnr": False} or {"kind": "flow", "shift": 3.0, "multiplier": 1000} or
    {"kind": "flux", "shift": 1.15}."""

    arch: str  # "sd1" | "sd2" | "sdxl" | "sd3" | "flux" | "qwen_image"
    module: torch.nn.Module
    latent_format: LatentFormat
    sampling: dict[str, Any]
    config: dict[str, Any] = field(default_factory=dict)
    dtype: torch.dtype = torch.float32
    # whether `apply` reads cond["sample_sigmas"], the sampler's whole schedule (a flow-map model's targets)
    reads_schedule: ClassVar[bool] = False
    # whether `apply` reads cond["denoise_mask"], the latent's noise mask (Cosmos Predict2 joins it inverted)
    reads_denoise_mask: ClassVar[bool] = False

    def __post_init__(self) -> None:
        make_batch_invariant(self.module)  # batched steps give the unbatched bits (cluster.scheduling.batching)

    def apply(self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
        """Raw network output for input `x` (already `calculate_input`-scaled) at `timestep` (model units).
        `cond` keys: "context" [B,T,D]; "pooled" [B,P] (SDXL, SD3, Flux); "time_ids" [B,6] (SDXL);
        "guidance" [B] (Flux); "control" ControlResiduals or None; "concat" [B,C',H,W], channels joined to
        the input (InstructPix2Pix); "ref_latents" / "ref_latents_method" (Flux Kontext, FLUX.2, Qwen-Image)."""
        raise NotImplementedError

    def inpaint_latent(
        self, ms: Any, sigma: torch.Tensor, noise: torch.Tensor, latent_image: torch.Tensor
    ) -> torch.Tensor:
        """What an inpainting step puts outside the noise mask: the original latent noised to `sigma` (ComfyUI's
        scale_latent_inpaint)."""
        return ms.noise_scaling(sigma, noise, latent_image)

    def step_timesteps(self, t: torch.Tensor, denoise_mask: torch.Tensor | None) -> torch.Tensor:
        """The timesteps the network takes for a batch at `t` [N] under a noise mask (ComfyUI's
        process_timestep): `t` itself unless the model reads the mask."""
        return t

    def concat_image(
        self, image: torch.Tensor | None, x: torch.Tensor, mask: torch.Tensor | None = None, mask_index: int = 0
    ) -> torch.Tensor | None:
        """What this model takes joined to its input channels for a cond's concat_latent_image (raw latent or
        None), concat_mask (or None), concat_mask_index (the image channels before the mask) and the step's input
        `x`; None for a model that takes only the latent."""
        return None


# Anima's text encoder puts the prompt's T5 token ids and their weights beside the conditioning (ComfyUI's keys);
# its diffusion model's LLM adapter reads them.
ANIMA_KEYS = ("t5xxl_ids", "t5xxl_weights")
# HiDream's text encoder puts its Llama's 32 hidden states [1, 32, T, 4096] beside the conditioning (ComfyUI's key).
HIDREAM_KEYS = ("conditioning_llama3",)
# LTX-Video 0.9's T5 (CLIPLoader type ltxv) puts its token mask [1, T] beside the conditioning (ComfyUI's key); the
# transformer masks the padding out of cross-attention with it.
TEXT_MASK_KEYS = ("attention_mask",)
# A second text encoder's states beside the conditioning (ComfyUI's keys): Hunyuan Image 2.1's ByT5 glyph encoder's
# of the quoted text [1, T, D], which its diffusion model maps into its text stream; HunyuanDiT's mT5-XL states
# [1, T, D] and their mask [1, T] (the BERT states are the conditioning, their mask the text mask above).
BYT5_KEYS = ("conditioning_byt5small", "conditioning_mt5xl", "attention_mask_mt5xl")


@dataclass
class TextEncoder:
    """One CLIP object of ComfyUI: tokenizer(s) + encoder(s) (CLIP-L; CLIP-L+G for SDXL; CLIP-L+T5 for Flux)."""

    arch: str
    modules: dict[str, torch.nn.Module]
    layer: int | None = None  # CLIPSetLastLayer's stop_at_clip_layer; None = the model's default

    def tokenize(self, text: str) -> dict[str, list[list[tuple[int, float]]]]:
        """ComfyUI's tokenization: per sub-encoder ("l", "g", "t5xxl"), 77-token chunks of (id, weight)."""
        raise NotImplementedError

    def encode(self, tokens: dict[str, list[list[tuple[int, float]]]]) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(cond [1,T,D], pooled [1,P] or None) as CLIPTextEncode puts them in CONDITIONING."""
        raise NotImplementedError


@dataclass
class VAEModel:
    arch: str
    module: torch.nn.Module
    latent_channels: int
    downscale: int = 8

    def encode(self, pixels: torch.Tensor) -> torch.Tensor:
        """IMAGE [B,H,W,3] 0..1 -> raw latent [B,C,H/8,W/8] (the posterior's mode)."""
        raise NotImplementedError

    def decode(self, latent: torch.Tensor) -> torch.Tensor:
        """raw latent -> IMAGE [B,H,W,3] clamped to 0..1."""
        raise NotImplementedError
