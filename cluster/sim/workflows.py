"""Workflows as DAGs of ModelFn invocations, and the catalogues the paper evaluates (S1, S2).

A basic workflow is the paper's Fig. 1: text encoders (in parallel), one `denoise_step` invocation
per step of the diffusion model (a chain), then the VAE decoder. A ControlNet workflow runs a
`controlnet_step` before each denoising step; a LoRA workflow uses a different (merged) diffusion
model. The ServerlessT2I S1/S2 settings use Z-Image and Flux2-Klein, which have no public profile;
their profiles are scaled from measured ones by parameter count (profiles.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cluster.sim.gpu_profiles import REFERENCE, GPUSpec, ModelProfile, h800_profiles, lora_variant


@dataclass(frozen=True)
class SimNode:
    """One ModelFn call of a modelled workflow: its ModelFn, its model, the nodes it waits for, its output size."""

    fn: str
    model: str
    deps: tuple[int, ...]
    out_bytes: int


@dataclass
class Workflow:
    name: str
    nodes: list[SimNode]  # topological order
    succ: list[list[int]] = field(init=False)
    roots: list[int] = field(init=False)

    def __post_init__(self) -> None:
        self.succ = [[] for _ in self.nodes]
        for i, n in enumerate(self.nodes):
            for d in n.deps:
                if d >= i:
                    raise ValueError(f"{self.name}: node {i} depends on a later node {d}")
                self.succ[d].append(i)
        self.roots = [i for i, n in enumerate(self.nodes) if not n.deps]

    @property
    def models(self) -> list[str]:
        return list(dict.fromkeys(n.model for n in self.nodes))

    def remaining(self, compute: dict[str, float]) -> list[float]:
        """Critical-path seconds of the work after each node (the scheduler's r(n))."""
        rem = [0.0] * len(self.nodes)
        for i in range(len(self.nodes) - 1, -1, -1):
            rem[i] = max((rem[s] + compute[self.nodes[s].model] for s in self.succ[i]), default=0.0)
        return rem

    def solo_s(self, compute: dict[str, float]) -> float:
        """Latency alone on a warm cluster: the critical path of compute (no loading, no queueing)."""
        rem = self.remaining(compute)
        return max(rem[r] + compute[self.nodes[r].model] for r in self.roots)

    def work_s(self, compute: dict[str, float]) -> float:
        """GPU-seconds of compute one request needs."""
        return sum(compute[n.model] for n in self.nodes)


def basic(
    name: str,
    encoders: list[str],
    diffusion: str,
    steps: int,
    vae: str,
    controlnet: str | None = None,
    latent_bytes: int = 1 << 19,
    emb_bytes: int = 4 << 20,
) -> Workflow:
    nodes = [SimNode("text_encode", e, (), emb_bytes) for e in encoders]
    enc = tuple(range(len(encoders)))
    prev: tuple[int, ...] = ()
    for _ in range(steps):
        deps = enc + prev
        if controlnet is not None:
            nodes.append(SimNode("controlnet_step", controlnet, deps, latent_bytes))
            deps = deps + (len(nodes) - 1,)
        nodes.append(SimNode("denoise_step", diffusion, deps, latent_bytes))
        prev = (len(nodes) - 1,)
    nodes.append(SimNode("vae_decode", vae, prev, 3 * latent_bytes))
    return Workflow(name, nodes)


FLUX_ENC = ["CLIP_Flux", "T5_Flux"]
SD3_ENC = ["CLIP_L", "CLIP_G", "T5"]
SDXL_ENC = ["CLIP_SDXL_1", "CLIP_SDXL_2"]


def library() -> dict[str, Workflow]:
    """Every basic workflow (text encoders, diffusion model, VAE) the settings and experiments draw on.
    Steps are the models' defaults; Z-Image and Z-Image-Turbo share their text encoder and VAE."""
    wfs = [
        basic("sd3.5-large", SD3_ENC, "StableDiffusion35Large", 28, "StableDiffusion35LargeVAE"),
        basic("z-image", ["Qwen3_4B"], "ZImage", 50, "Flux1VAE"),
        basic("z-image-turbo", ["Qwen3_4B"], "ZImageTurbo", 8, "Flux1VAE"),
        basic("flux1-dev", FLUX_ENC, "Flux1Dev", 28, "Flux1VAE"),
        basic("flux2-klein", ["Qwen3_8B"], "Flux2Klein", 4, "Flux2VAE"),
        basic("flux1-schnell", FLUX_ENC, "Flux1Schnell", 4, "Flux1VAE"),
        basic("sd3", SD3_ENC, "StableDiffusion3", 28, "StableDiffusion3VAE"),
        basic("sdxl", SDXL_ENC, "StableDiffusionXL", 30, "StableDiffusionXLVAE"),
        basic("sd1.5", ["CLIP_SD15"], "StableDiffusion15", 50, "StableDiffusion15VAE"),
    ]
    return {w.name: w for w in wfs}


def s1() -> list[Workflow]:
    """The paper's S1 (Table 1): basic workflows on SD3.5-Large, Z-Image, Z-Image-Turbo, Flux1-Dev and
    Flux2-Klein (the Z-Image and Flux2-Klein profiles are scaled, profiles.py)."""
    lib = library()
    return [lib[n] for n in ("sd3.5-large", "z-image", "z-image-turbo", "flux1-dev", "flux2-klein")]


def s2() -> list[Workflow]:
    """Twenty workflows: S1, Flux1-Schnell, SD1.5, ControlNet variants (two per base model with a profiled
    ControlNet) and LoRA variants (paper Table 1, S2, on the models with public profiles)."""
    lib = library()
    out = s1() + [lib["flux1-schnell"], lib["sd1.5"]]
    cn = [
        ("flux1-dev", FLUX_ENC, "Flux1Dev", 28, "Flux1VAE", ["Flux1DevControlNetCanny", "Flux1DevControlNetDepth"]),
        (
            "sd3.5-large",
            SD3_ENC,
            "StableDiffusion35Large",
            28,
            "StableDiffusion35LargeVAE",
            ["StableDiffusion35LargeControlNetCanny", "StableDiffusion35LargeControlNetDepth"],
        ),
        (
            "sd3",
            SD3_ENC,
            "StableDiffusion3",
            28,
            "StableDiffusion3VAE",
            ["StableDiffusion3ControlNetCanny", "StableDiffusion3ControlNetPose"],
        ),
        (
            "sdxl",
            SDXL_ENC,
            "StableDiffusionXL",
            30,
            "StableDiffusionXLVAE",
            ["StableDiffusionXLControlNetCanny", "StableDiffusionXLControlNetDepth"],
        ),
    ]
    for name, enc, dm, steps, vae, nets in cn:
        for net in nets:
            out.append(basic(f"{name}+{net.split('ControlNet')[-1].lower()}", enc, dm, steps, vae, controlnet=net))
    for name, enc, dm, steps, vae in [
        ("flux1-dev", FLUX_ENC, "Flux1Dev", 28, "Flux1VAE"),
        ("flux1-schnell", FLUX_ENC, "Flux1Schnell", 4, "Flux1VAE"),
        ("sdxl", SDXL_ENC, "StableDiffusionXL", 30, "StableDiffusionXLVAE"),
        ("sd1.5", ["CLIP_SD15"], "StableDiffusion15", 50, "StableDiffusion15VAE"),
        ("z-image", ["Qwen3_4B"], "ZImage", 50, "Flux1VAE"),
    ]:
        out.append(basic(f"{name}+lora", enc, f"{dm}+lora", steps, vae))
    return out


def catalogue(setting: str = "s1") -> tuple[list[Workflow], dict[str, ModelProfile]]:
    """Workflows of a setting and the profiles of every model they use."""
    if setting not in ("s1", "s2"):
        raise ValueError(f"unknown setting {setting!r}; choose s1 or s2")
    profiles = h800_profiles()
    for base in list(profiles.values()):
        if base.name in ("Flux1Dev", "Flux1Schnell", "StableDiffusionXL", "StableDiffusion15", "ZImage"):
            v = lora_variant(base, "lora")
            profiles[v.name] = v
    return (s1() if setting == "s1" else s2()), profiles


def compute_times(profiles: dict[str, ModelProfile], gpu: GPUSpec = REFERENCE) -> dict[str, float]:
    return {k: gpu.exec_s(p) for k, p in profiles.items()}
