"""What the simulator knows about models and GPUs: measured per-model load and compute times.

The figures are the DiFlow artifact's H800 measurements (shared/reference/gpu-profiles.md): load from
pinned host memory, load from disk, GPU memory, and one forward pass (one denoising step for a
diffusion model) at batch size 1. Every model is cut into `layers` uniform layers, which is what the
layer cache and prefix loading (paper Eq. 1-2) work on.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

GIB = 1024 ** 3


@dataclass(frozen=True)
class ModelProfile:
    name: str
    load_h2d_s: float       # host (pinned) -> device, whole model, on the reference GPU
    load_disk_s: float      # disk -> host memory
    gib: float              # device memory the weights take
    exec_s: float           # one forward pass at batch size 1 on the reference GPU
    layers: int = 24

    @property
    def nbytes(self) -> int:
        return int(self.gib * GIB)


@dataclass(frozen=True)
class GPUSpec:
    """One device. Times scale from the reference (H800) by the compute and bandwidth ratios."""
    name: str = "H800"
    memory_gib: float = 80.0
    h2d_gbps: float = 8.0           # effective pinned host -> device GB/s of the reference profiles
    link_gbps: float = 100.0        # device <-> device (NVLink / RDMA through the NVSHMEM arena)
    speed: float = 1.0              # compute speed relative to the reference GPU

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

# Transformer depth decides how finely a model can be split; text encoders and VAEs are shallower.
_LAYERS = {"Flux1Dev": 57, "Flux1Schnell": 57, "StableDiffusion35Large": 38, "StableDiffusion3": 24,
           "T5": 24, "T5_Flux": 24, "CLIP_G": 32, "CLIP_L": 12}


def h800_profiles() -> dict[str, ModelProfile]:
    out = {}
    for name, (disk, h2d, gib, ex) in _H800.items():
        layers = _LAYERS.get(name, 12 if ("VAE" in name or "CLIP" in name) else 24)
        out[name] = ModelProfile(name, h2d, disk, gib, ex, layers)
    return out


def lora_variant(p: ModelProfile, tag: str, fetch_s: float = 0.05) -> ModelProfile:
    """A base model with a LoRA merged: other weights, same shape, plus the adapter's fetch."""
    return replace(p, name=f"{p.name}+{tag}", load_h2d_s=p.load_h2d_s + fetch_s)
