"""What the simulator knows about models and GPUs: measured per-model load and compute times.

The figures are the DiFlow artifact's H800 measurements (shared/reference/gpu-profiles.md): load from
pinned host memory, load from disk, GPU memory, and one denoising step as the default pipeline runs
it (batch 2 with classifier-free guidance, else batch 1; one forward pass for encoders and VAEs).
Models of the paper's S1 with no public profile are scaled from a measured one by parameter count. Every model is cut into `layers` uniform layers, which is what the
layer cache and prefix loading (paper Eq. 1-2) work on.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

GIB = 1024**3


@dataclass(frozen=True)
class ModelProfile:
    name: str
    load_h2d_s: float  # host (pinned) -> device, whole model, on the reference GPU
    load_disk_s: float  # disk -> host memory
    gib: float  # device memory the weights take
    exec_s: float  # one invocation (a denoising step: with CFG's batch of 2) on the reference GPU
    layers: int = 24
    # Profiled seconds per batch size, (size, seconds) ascending, when a batch's run time was measured
    # rather than modelled: a batch runs as long as the smallest profiled size holding it (padded).
    batch_s: tuple[tuple[int, float], ...] = ()

    @property
    def nbytes(self) -> int:
        return int(self.gib * GIB)

    def padded_batch_s(self, n: int) -> float | None:
        """Profiled seconds of a batch of `n` (None: not profiled, or larger than every profiled size)."""
        return next((s for size, s in self.batch_s if size >= n), None)


@dataclass(frozen=True)
class GPUSpec:
    """One device. Times scale from the reference (H800) by the compute and bandwidth ratios."""

    name: str = "H800"
    memory_gib: float = 80.0
    h2d_gbps: float = 8.0  # effective pinned host -> device GB/s of the reference profiles
    link_gbps: float = 100.0  # device <-> device (NVLink / RDMA through the NVSHMEM arena)
    speed: float = 1.0  # compute speed relative to the reference GPU

    def load_s(self, p: ModelProfile) -> float:
        return p.load_h2d_s * REFERENCE.h2d_gbps / self.h2d_gbps

    def exec_s(self, p: ModelProfile) -> float:
        return p.exec_s / self.speed

    def transfer_s(self, nbytes: int) -> float:
        return nbytes / (self.link_gbps * 1e9)


REFERENCE = GPUSpec()
GPUS = {
    "H800": REFERENCE,
    "H200": GPUSpec("H200", 141.0, 8.0 * 1.0, 100.0, 1.0),
    "A100-80G": GPUSpec("A100-80G", 80.0, 8.0 * 0.8, 60.0, 0.5),
}

# name: (load disk s, load h2d s, GiB, exec bs=1 s) -- gpu-profiles.md, DiFlow artifact, H800.
_H800 = {
    "CLIP_Flux": (0.09, 0.030, 0.24, 0.0030),
    "CLIP_G": (31.71, 0.293, 2.65, 0.0140),
    "CLIP_L": (5.71, 0.060, 0.46, 0.0037),
    "CLIP_SD15": (0.26, 0.030, 0.24, 0.0030),
    "CLIP_SDXL_1": (0.25, 0.060, 0.46, 0.0037),
    "CLIP_SDXL_2": (0.33, 0.155, 1.29, 0.0066),
    "Flux1Dev": (0.36, 2.942, 22.17, 0.2433),
    "Flux1DevControlNetCanny": (0.04, 0.175, 1.39, 0.0109),
    "Flux1DevControlNetDepth": (0.01, 0.168, 1.39, 0.0109),
    "Flux1Schnell": (0.21, 2.736, 22.15, 0.2237),
    "Flux1VAE": (0.03, 0.027, 0.16, 0.2531),
    "StableDiffusion15": (1.38, 0.195, 1.61, 0.0166),
    "StableDiffusion15ControlNetCanny": (0.12, 0.082, 0.68, 0.0080),
    "StableDiffusion15ControlNetDepth": (4.51, 0.079, 0.68, 0.0080),
    "StableDiffusion15VAE": (0.18, 0.023, 0.16, 0.0263),
    "StableDiffusion3": (7.70, 0.439, 3.93, 0.0370),
    "StableDiffusion35Large": (1.54, 1.921, 15.54, 0.1240),
    "StableDiffusion35LargeControlNetCanny": (16.57, 0.480, 4.28, 0.0444),
    "StableDiffusion35LargeControlNetDepth": (0.68, 0.456, 4.28, 0.0443),
    "StableDiffusion35LargeVAE": (0.06, 0.023, 0.16, 0.1089),
    "StableDiffusion3ControlNetCanny": (0.84, 0.133, 1.12, 0.0101),
    "StableDiffusion3ControlNetPose": (0.70, 0.146, 1.12, 0.0101),
    "StableDiffusion3VAE": (0.03, 0.027, 0.16, 0.1221),
    "StableDiffusionXL": (3.65, 0.569, 4.88, 0.0400),
    "StableDiffusionXLControlNetCanny": (1.96, 0.276, 2.38, 0.0191),
    "StableDiffusionXLControlNetDepth": (18.17, 0.277, 2.38, 0.0190),
    "StableDiffusionXLVAE": (0.16, 0.022, 0.16, 0.1673),
    "T5": (4.32, 1.664, 10.75, 0.0217),
    "T5_Flux": (2.92, 1.242, 8.87, 0.0241),
}

# One denoising step as Diffusers runs these models by default: classifier-free guidance batches the
# conditional and unconditional pass, so a step costs the measured batch-2 pass (gpu-profiles.md,
# `exec bs=2`). Flux1-Dev is guidance-distilled and Flux1-Schnell timestep-distilled: one pass a step.
_CFG_STEP = {
    "StableDiffusion15": 0.0173,
    "StableDiffusion3": 0.0692,
    "StableDiffusion35Large": 0.2308,
    "StableDiffusionXL": 0.0540,
    "StableDiffusion15ControlNetCanny": 0.0082,
    "StableDiffusion15ControlNetDepth": 0.0081,
    "StableDiffusion3ControlNetCanny": 0.0191,
    "StableDiffusion3ControlNetPose": 0.0191,
    "StableDiffusion35LargeControlNetCanny": 0.0871,
    "StableDiffusion35LargeControlNetDepth": 0.0863,
    "StableDiffusionXLControlNetCanny": 0.0265,
    "StableDiffusionXLControlNetDepth": 0.0264,
}

# Transformer depth decides how finely a model can be split; text encoders and VAEs are shallower.
_LAYERS = {
    "Flux1Dev": 57,
    "Flux1Schnell": 57,
    "StableDiffusion35Large": 38,
    "StableDiffusion3": 24,
    "T5": 24,
    "T5_Flux": 24,
    "CLIP_G": 32,
    "CLIP_L": 12,
}

# Models of the paper's S1 without a public profile, scaled from a measured model of the same kind by
# parameter count (weights in bf16: memory and load time scale with the bytes; a forward pass at the
# same resolution scales with the FLOPs, about the parameters): Z-Image and Z-Image-Turbo (6.15B
# single-stream DiT, Qwen3-4B text encoder, the Flux VAE), Flux2-Klein (9B DiT, Qwen3-8B text
# encoder, its own VAE, profiled as the Flux VAE). name: (measured base, parameters / base's, layers)
FLUX1_PARAMS, T5_ENCODER_PARAMS = 11.9e9, 4.76e9
_SCALED = {
    "ZImage": ("Flux1Dev", 6.15e9 / FLUX1_PARAMS, 30),
    "ZImageTurbo": ("Flux1Dev", 6.15e9 / FLUX1_PARAMS, 30),
    "Flux2Klein": ("Flux1Dev", 9.0e9 / FLUX1_PARAMS, 32),
    "Qwen3_4B": ("T5_Flux", 4.0e9 / T5_ENCODER_PARAMS, 36),
    "Qwen3_8B": ("T5_Flux", 8.2e9 / T5_ENCODER_PARAMS, 36),
    "Flux2VAE": ("Flux1VAE", 1.0, 12),
}
# Z-Image (base) runs classifier-free guidance: a step costs Flux1-Dev's batch-2 over batch-1 ratio.
_SCALED_CFG = {"ZImage": 0.4663 / 0.2433}


def h800_profiles() -> dict[str, ModelProfile]:
    out = {}
    for name, (disk, h2d, gib, ex) in _H800.items():
        layers = _LAYERS.get(name, 12 if ("VAE" in name or "CLIP" in name) else 24)
        out[name] = ModelProfile(name, h2d, disk, gib, _CFG_STEP.get(name, ex), layers)
    for name, (base, ratio, layers) in _SCALED.items():
        b = _H800[base]
        out[name] = ModelProfile(
            name, b[1] * ratio, b[0] * ratio, b[2] * ratio, b[3] * ratio * _SCALED_CFG.get(name, 1.0), layers
        )
    return out


def lora_variant(p: ModelProfile, tag: str, fetch_s: float = 0.05) -> ModelProfile:
    """A base model with a LoRA merged: other weights, same shape, plus the adapter's fetch."""
    return replace(p, name=f"{p.name}+{tag}", load_h2d_s=p.load_h2d_s + fetch_s)
