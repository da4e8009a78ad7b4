"""`comfy.model_base`: ComfyUI's diffusion model wrappers. What packs use at import time works: the
ModelType enum (ComfyUI's members and values), model_sampling(model_config, model_type) (real schedules, see
comfy.model_sampling), sdxl_pooled, Timestep (the sinusoidal embedding SDXL's size conditioning uses), and
the BaseModel classes as names to subclass and check with isinstance. Instantiating a model class refuses:
the diffusion models live on the executors, so there is no in-process BaseModel to build; packs read
`model.model` of a MODEL, which is this backend's view of it."""

from __future__ import annotations

import math
from enum import Enum
from typing import Any

import torch

from comfy_bridge.compat.comfy import conds  # noqa: F401  (comfy.model_base.conds)
from comfy_bridge.compat.comfy import model_sampling as ms
from comfy_bridge.packs.origin import UnsupportedFeature


class ModelType(Enum):
    EPS = 1
    V_PREDICTION = 2
    V_PREDICTION_EDM = 3
    STABLE_CASCADE = 4
    EDM = 5
    FLOW = 6
    V_PREDICTION_CONTINUOUS = 7
    FLUX = 8
    IMG_TO_IMG = 9
    FLOW_COSMOS = 10


# ModelType -> (schedule, parameterisation), as ComfyUI pairs them.
SAMPLING = {
    ModelType.EPS: (ms.ModelSamplingDiscrete, ms.EPS),
    ModelType.V_PREDICTION: (ms.ModelSamplingDiscrete, ms.V_PREDICTION),
    ModelType.V_PREDICTION_EDM: (ms.ModelSamplingContinuousEDM, ms.V_PREDICTION),
    ModelType.FLOW: (ms.ModelSamplingDiscreteFlow, ms.CONST),
    ModelType.STABLE_CASCADE: (ms.StableCascadeSampling, ms.EPS),
    ModelType.EDM: (ms.ModelSamplingContinuousEDM, ms.EDM),
    ModelType.V_PREDICTION_CONTINUOUS: (ms.ModelSamplingContinuousV, ms.V_PREDICTION),
    ModelType.FLUX: (ms.ModelSamplingFlux, ms.CONST),
    ModelType.IMG_TO_IMG: (ms.ModelSamplingDiscrete, ms.IMG_TO_IMG),
    ModelType.FLOW_COSMOS: (ms.ModelSamplingCosmosRFlow, ms.COSMOS_RFLOW),
}


def model_sampling(model_config: Any, model_type: ModelType) -> torch.nn.Module:
    """The sampling object of a model config (its sampling_settings) and type."""
    schedule, param = SAMPLING[model_type]

    class ModelSampling(schedule, param):  # type: ignore[valid-type,misc]
        pass

    return ModelSampling(model_config)


def timestep_embedding(timesteps: torch.Tensor, dim: int, max_period: int = 10000) -> torch.Tensor:
    """Sinusoidal embedding [cos | sin] of each timestep, frequencies max_period^(-i / (dim // 2))."""
    half = dim // 2
    freqs = torch.exp(
        -math.log(max_period) * torch.arange(0, half, dtype=torch.float32, device=timesteps.device) / half
    )
    args = timesteps[:, None].float() * freqs[None]
    emb = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
    if dim % 2:
        emb = torch.cat([emb, torch.zeros_like(emb[:, :1])], dim=-1)
    return emb


class Timestep(torch.nn.Module):
    """Module form of timestep_embedding (SDXL embeds its size and crop conditioning with Timestep(256))."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        return timestep_embedding(t, self.dim)


class CLIPEmbeddingNoiseAugmentation(torch.nn.Module):
    """unCLIP's noise augmentation of CLIP image embeddings (a model part)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise UnsupportedFeature(
            "comfy.model_base.CLIPEmbeddingNoiseAugmentation",
            "unCLIP noise augmentation runs inside the diffusion model, on the executors",
        )


def sdxl_pooled(args: dict, noise_augmentor: Any) -> torch.Tensor:
    """The pooled text embedding SDXL's adm input starts with (unCLIP conditioning is not supported)."""
    if "unclip_conditioning" in args:
        raise UnsupportedFeature(
            "comfy.model_base.sdxl_pooled with unclip_conditioning",
            "unCLIP noise augmentation runs inside the diffusion model, on the executors",
        )
    return args["pooled_output"]


class BaseModel(torch.nn.Module):
    """ComfyUI's in-process diffusion model. A name to subclass and check against; building one refuses."""

    def __init__(
        self,
        model_config: Any = None,
        model_type: ModelType = ModelType.EPS,
        device: Any = None,
        *args: Any,
        **kwargs: Any,
    ) -> None:
        raise UnsupportedFeature(
            f"comfy.model_base.{type(self).__name__}(...)",
            "the diffusion models are built and run by the executors, not in the server "
            "process; a MODEL's .model is this backend's view of it",
        )

    def apply_model(
        self,
        x: Any,
        t: Any,
        c_concat: Any = None,
        c_crossattn: Any = None,
        control: Any = None,
        transformer_options: Any = None,
        **kwargs: Any,
    ) -> Any:
        """ComfyUI's denoiser call. Packs name it in annotations (TiledDiffusion's model-function wrappers);
        calling it needs ComfyUI's in-process model, which this backend does not have."""
        raise UnsupportedFeature(
            f"comfy.model_base.{type(self).__name__}.apply_model(...)",
            "the diffusion models run on the executors, not in the server process",
        )


def _model(name: str, *bases: type) -> type:
    return type(
        name,
        bases or (BaseModel,),
        {"__module__": __name__, "__doc__": f"ComfyUI's {name} model (building one refuses)."},
    )


SD21UNCLIP = _model("SD21UNCLIP")
SDXLRefiner = _model("SDXLRefiner")
SDXL = _model("SDXL")
SVD_img2vid = _model("SVD_img2vid")
SV3D_u = _model("SV3D_u", SVD_img2vid)
SV3D_p = _model("SV3D_p", SVD_img2vid)
Stable_Zero123 = _model("Stable_Zero123")
SD_X4Upscaler = _model("SD_X4Upscaler")


class IP2P:
    """InstructPix2Pix's extra image input (mixin of the *_instructpix2pix models)."""


SD15_instructpix2pix = _model("SD15_instructpix2pix", IP2P, BaseModel)
SDXL_instructpix2pix = _model("SDXL_instructpix2pix", IP2P, SDXL)
Lotus = _model("Lotus")
StableCascade_C = _model("StableCascade_C")
StableCascade_B = _model("StableCascade_B")
SD3 = _model("SD3")
AuraFlow = _model("AuraFlow")
StableAudio1 = _model("StableAudio1")
HunyuanDiT = _model("HunyuanDiT")
PixArt = _model("PixArt")
Flux = _model("Flux")
GenmoMochi = _model("GenmoMochi")
LTXV = _model("LTXV")
HunyuanVideo = _model("HunyuanVideo")
HunyuanVideoI2V = _model("HunyuanVideoI2V", HunyuanVideo)
HunyuanVideoSkyreelsI2V = _model("HunyuanVideoSkyreelsI2V", HunyuanVideo)
CosmosVideo = _model("CosmosVideo")
CosmosPredict2 = _model("CosmosPredict2")
Anima = _model("Anima")  # newer ComfyUI: the Anima DiT (comfyui-tooling-nodes checks model types against it)
Lumina2 = _model("Lumina2")
WAN21 = _model("WAN21")
WAN21_Vace = _model("WAN21_Vace", WAN21)
WAN21_Camera = _model("WAN21_Camera", WAN21)
WAN21_HuMo = _model("WAN21_HuMo", WAN21)
WAN22_Animate = _model("WAN22_Animate", WAN21)
WAN22_S2V = _model("WAN22_S2V", WAN21)
WAN22 = _model("WAN22", WAN21)
Hunyuan3Dv2 = _model("Hunyuan3Dv2")
Hunyuan3Dv2_1 = _model("Hunyuan3Dv2_1")
HiDream = _model("HiDream")
Chroma = _model("Chroma", Flux)
ChromaRadiance = _model("ChromaRadiance", Chroma)
ACEStep = _model("ACEStep")
Omnigen2 = _model("Omnigen2")
QwenImage = _model("QwenImage")
HunyuanImage21 = _model("HunyuanImage21")
HunyuanImage21Refiner = _model("HunyuanImage21Refiner", HunyuanImage21)


def convert_tensor(extra: Any, dtype: Any, device: Any) -> Any:
    """A model input moved to `device`, cast to `dtype` unless it is an integer tensor (non-tensors as is)."""
    if not hasattr(extra, "dtype"):
        return extra
    keep = extra.dtype in (torch.int, torch.long)
    return extra.to(device=device, dtype=None if keep else dtype)
