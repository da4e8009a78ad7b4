"""`comfy.supported_models`: ComfyUI's model config classes for the image families, with ComfyUI's class
attributes (unet_config that detection matches on, sampling_settings, latent_format, memory_usage_factor)
and model_type. Packs subclass them (a custom family's config) and check `model.model.model_config`
against them; get_model builds a comfy.model_base model, which refuses (models live on the executors).
`models` is the detection order ComfyUI tries them in (for the families defined here)."""

from __future__ import annotations

from typing import Any

import torch

from comfy_bridge.compat.comfy import latent_formats, model_base, supported_models_base  # noqa: F401
from comfy_bridge.compat.comfy.supported_models_base import BASE


class SD15(BASE):
    unet_config = {
        "context_dim": 768,
        "model_channels": 320,
        "use_linear_in_transformer": False,
        "adm_in_channels": None,
        "use_temporal_attention": False,
    }
    unet_extra_config = {"num_heads": 8, "num_head_channels": -1}
    latent_format = latent_formats.SD15
    memory_usage_factor = 1.0


class SD20(BASE):
    unet_config = {
        "context_dim": 1024,
        "model_channels": 320,
        "use_linear_in_transformer": True,
        "adm_in_channels": None,
        "use_temporal_attention": False,
    }
    unet_extra_config = {"num_heads": -1, "num_head_channels": 64, "attn_precision": torch.float32}
    latent_format = latent_formats.SD15
    memory_usage_factor = 1.0

    def model_type(self, state_dict: dict, prefix: str = "") -> model_base.ModelType:
        # SD2 768-v checkpoints: told apart by the spread of one late norm bias (inpainting ones are eps).
        if self.unet_config["in_channels"] == 4:
            bias = state_dict.get(f"{prefix}output_blocks.11.1.transformer_blocks.0.norm1.bias")
            if bias is not None and torch.std(bias, unbiased=False) > 0.09:
                return model_base.ModelType.V_PREDICTION
        return model_base.ModelType.EPS


class SD21UnclipL(SD20):
    unet_config = {
        "context_dim": 1024,
        "model_channels": 320,
        "use_linear_in_transformer": True,
        "adm_in_channels": 1536,
        "use_temporal_attention": False,
    }
    noise_aug_config = {
        "noise_schedule_config": {"timesteps": 1000, "beta_schedule": "squaredcos_cap_v2"},
        "timestep_dim": 768,
    }


class SD21UnclipH(SD20):
    unet_config = {
        "context_dim": 1024,
        "model_channels": 320,
        "use_linear_in_transformer": True,
        "adm_in_channels": 2048,
        "use_temporal_attention": False,
    }
    noise_aug_config = {
        "noise_schedule_config": {"timesteps": 1000, "beta_schedule": "squaredcos_cap_v2"},
        "timestep_dim": 1024,
    }


class SDXLRefiner(BASE):
    unet_config = {
        "model_channels": 384,
        "use_linear_in_transformer": True,
        "context_dim": 1280,
        "adm_in_channels": 2560,
        "transformer_depth": [0, 0, 4, 4, 4, 4, 0, 0],
        "use_temporal_attention": False,
    }
    latent_format = latent_formats.SDXL
    memory_usage_factor = 1.0

    def get_model(self, state_dict: dict, prefix: str = "", device: Any = None) -> model_base.BaseModel:
        return model_base.SDXLRefiner(self, device=device)


class SDXL(BASE):
    unet_config = {
        "model_channels": 320,
        "use_linear_in_transformer": True,
        "transformer_depth": [0, 0, 2, 2, 10, 10],
        "context_dim": 2048,
        "adm_in_channels": 2816,
        "use_temporal_attention": False,
    }
    latent_format = latent_formats.SDXL
    memory_usage_factor = 0.8

    def model_type(self, state_dict: dict, prefix: str = "") -> model_base.ModelType:
        if "edm_mean" in state_dict and "edm_std" in state_dict:  # Playground v2.5
            self.latent_format = latent_formats.SDXL_Playground_2_5()
            self.sampling_settings.update(sigma_data=0.5, sigma_max=80.0, sigma_min=0.002)
            return model_base.ModelType.EDM
        if "edm_vpred.sigma_max" in state_dict:
            self.sampling_settings["sigma_max"] = float(state_dict["edm_vpred.sigma_max"].item())
            if "edm_vpred.sigma_min" in state_dict:
                self.sampling_settings["sigma_min"] = float(state_dict["edm_vpred.sigma_min"].item())
            return model_base.ModelType.V_PREDICTION_EDM
        if "v_pred" in state_dict:
            if "ztsnr" in state_dict:
                self.sampling_settings["zsnr"] = True
            return model_base.ModelType.V_PREDICTION
        return model_base.ModelType.EPS

    def get_model(self, state_dict: dict, prefix: str = "", device: Any = None) -> model_base.BaseModel:
        return model_base.SDXL(self, model_type=self.model_type(state_dict, prefix), device=device)


def _sdxl_variant(name: str, depth: list[int]) -> type:
    config = dict(SDXL.unet_config, transformer_depth=depth)
    return type(name, (SDXL,), {"unet_config": config, "__module__": __name__})


SSD1B = _sdxl_variant("SSD1B", [0, 0, 2, 2, 4, 4])
Segmind_Vega = _sdxl_variant("Segmind_Vega", [0, 0, 1, 1, 2, 2])
KOALA_700M = _sdxl_variant("KOALA_700M", [0, 2, 5])
KOALA_1B = _sdxl_variant("KOALA_1B", [0, 2, 6])


class SVD_img2vid(BASE):
    unet_config = {
        "model_channels": 320,
        "in_channels": 8,
        "use_linear_in_transformer": True,
        "transformer_depth": [1, 1, 1, 1, 1, 1, 0, 0],
        "context_dim": 1024,
        "adm_in_channels": 768,
        "use_temporal_attention": True,
        "use_temporal_resblock": True,
    }
    unet_extra_config = {"num_heads": -1, "num_head_channels": 64, "attn_precision": torch.float32}
    latent_format = latent_formats.SD15
    sampling_settings = {"sigma_max": 700.0, "sigma_min": 0.002}

    def get_model(self, state_dict: dict, prefix: str = "", device: Any = None) -> model_base.BaseModel:
        return model_base.SVD_img2vid(self, device=device)


class SD15_instructpix2pix(SD15):
    unet_config = dict(SD15.unet_config, in_channels=8)


class SDXL_instructpix2pix(SDXL):
    unet_config = dict(SDXL.unet_config, in_channels=8)


class SD3(BASE):
    unet_config = {"in_channels": 16, "pos_embed_scaling_factor": None}
    sampling_settings = {"shift": 3.0}
    unet_extra_config: dict = {}
    latent_format = latent_formats.SD3
    memory_usage_factor = 1.2


class AuraFlow(BASE):
    unet_config = {"cond_seq_dim": 2048}
    sampling_settings = {"multiplier": 1.0, "shift": 1.73}
    unet_extra_config: dict = {}
    latent_format = latent_formats.SDXL


class HunyuanDiT(BASE):
    unet_config = {"image_model": "hydit"}
    unet_extra_config = {"attn_precision": torch.float32}
    sampling_settings = {"linear_start": 0.00085, "linear_end": 0.018}
    latent_format = latent_formats.SDXL
    memory_usage_factor = 1.3


class HunyuanDiT1(HunyuanDiT):
    unet_config = {"image_model": "hydit1"}
    unet_extra_config: dict = {}
    sampling_settings = {"linear_start": 0.00085, "linear_end": 0.03}


class Flux(BASE):
    unet_config = {"image_model": "flux", "guidance_embed": True}
    sampling_settings: dict = {}
    unet_extra_config: dict = {}
    latent_format = latent_formats.Flux
    memory_usage_factor = 3.1
    supported_inference_dtypes = [torch.bfloat16, torch.float16, torch.float32]

    def get_model(self, state_dict: dict, prefix: str = "", device: Any = None) -> model_base.BaseModel:
        return model_base.Flux(self, device=device)


class FluxInpaint(Flux):
    unet_config = {"image_model": "flux", "guidance_embed": True, "in_channels": 96}
    supported_inference_dtypes = [torch.bfloat16, torch.float32]


class FluxSchnell(Flux):
    unet_config = {"image_model": "flux", "guidance_embed": False}
    sampling_settings = {"multiplier": 1.0, "shift": 1.0}

    def get_model(self, state_dict: dict, prefix: str = "", device: Any = None) -> model_base.BaseModel:
        return model_base.Flux(self, model_type=model_base.ModelType.FLOW, device=device)


class GenmoMochi(BASE):
    unet_config = {"image_model": "mochi_preview"}
    sampling_settings = {"multiplier": 1.0, "shift": 6.0}
    unet_extra_config: dict = {}
    latent_format = latent_formats.Mochi
    memory_usage_factor = 2.0
    supported_inference_dtypes = [torch.bfloat16, torch.float32]


def _builds(config: type, model: type) -> None:
    def get_model(self: BASE, state_dict: dict, prefix: str = "", device: Any = None) -> model_base.BaseModel:
        return model(self, device=device)

    config.get_model = get_model  # type: ignore[method-assign]


for _config, _model in (
    (SD3, model_base.SD3),
    (AuraFlow, model_base.AuraFlow),
    (HunyuanDiT, model_base.HunyuanDiT),
    (GenmoMochi, model_base.GenmoMochi),
):
    _builds(_config, _model)


# ComfyUI's detection order, restricted to the classes above.
models = [
    SD15_instructpix2pix,
    SD15,
    SD20,
    SD21UnclipL,
    SD21UnclipH,
    SDXL_instructpix2pix,
    SDXLRefiner,
    SDXL,
    SSD1B,
    KOALA_700M,
    KOALA_1B,
    Segmind_Vega,
    SD3,
    AuraFlow,
    HunyuanDiT,
    HunyuanDiT1,
    FluxInpaint,
    Flux,
    FluxSchnell,
    GenmoMochi,
    SVD_img2vid,
]
