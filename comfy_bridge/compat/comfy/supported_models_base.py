"""`comfy.supported_models_base`: BASE, the model config class every ComfyUI model family derives from.
Its class attributes (unet_config, sampling_settings, latent_format, ...) and the pure methods (matches,
model_type, inpaint_model, __init__, the state-dict prefix helpers) behave as ComfyUI's; get_model builds a
comfy.model_base model, which refuses (the diffusion models live on the executors)."""

from __future__ import annotations

from typing import Any

import torch

from comfy_bridge.compat.comfy import latent_formats, model_base
from comfy_bridge.compat.comfy.utils import state_dict_prefix_replace


class ClipTarget:
    def __init__(self, tokenizer: Any, clip: Any) -> None:
        self.clip = clip
        self.tokenizer = tokenizer
        self.params: dict = {}


class BASE:
    unet_config: dict = {}
    unet_extra_config: dict = {"num_heads": -1, "num_head_channels": 64}
    required_keys: dict = {}
    clip_prefix: list = []
    clip_vision_prefix: str | None = None
    noise_aug_config: dict | None = None
    sampling_settings: dict = {}
    latent_format: Any = latent_formats.LatentFormat
    vae_key_prefix = ["first_stage_model."]
    text_encoder_key_prefix = ["cond_stage_model."]
    supported_inference_dtypes = [torch.float16, torch.bfloat16, torch.float32]
    memory_usage_factor = 2.0
    manual_cast_dtype: Any = None
    custom_operations: Any = None
    scaled_fp8: Any = None
    optimizations: dict = {"fp8": False}

    @classmethod
    def matches(cls, unet_config: dict, state_dict: dict | None = None) -> bool:
        """True when every key of the class's unet_config has the same value in unet_config (and every
        required key is in state_dict)."""
        if any(k not in unet_config or unet_config[k] != v for k, v in cls.unet_config.items()):
            return False
        return state_dict is None or all(k in state_dict for k in cls.required_keys)

    def __init__(self, unet_config: dict) -> None:
        self.unet_config = dict(unet_config)
        self.sampling_settings = dict(self.sampling_settings)
        self.latent_format = self.latent_format()
        self.optimizations = dict(self.optimizations)
        self.unet_config.update(self.unet_extra_config)

    def model_type(self, state_dict: dict, prefix: str = "") -> model_base.ModelType:
        return model_base.ModelType.EPS

    def inpaint_model(self) -> bool:
        return self.unet_config["in_channels"] > 4

    def get_model(self, state_dict: dict, prefix: str = "", device: Any = None) -> model_base.BaseModel:
        if self.noise_aug_config is not None:
            return model_base.SD21UNCLIP(
                self, self.noise_aug_config, model_type=self.model_type(state_dict, prefix), device=device
            )
        return model_base.BaseModel(self, model_type=self.model_type(state_dict, prefix), device=device)

    def process_clip_state_dict(self, state_dict: dict) -> dict:
        return state_dict_prefix_replace(state_dict, {k: "" for k in self.text_encoder_key_prefix}, filter_keys=True)

    def process_unet_state_dict(self, state_dict: dict) -> dict:
        return state_dict

    def process_vae_state_dict(self, state_dict: dict) -> dict:
        return state_dict

    def process_clip_state_dict_for_saving(self, state_dict: dict) -> dict:
        return state_dict_prefix_replace(state_dict, {"": self.text_encoder_key_prefix[0]})

    def process_clip_vision_state_dict_for_saving(self, state_dict: dict) -> dict:
        prefix = {"": self.clip_vision_prefix} if self.clip_vision_prefix is not None else {}
        return state_dict_prefix_replace(state_dict, prefix)

    def process_unet_state_dict_for_saving(self, state_dict: dict) -> dict:
        return state_dict_prefix_replace(state_dict, {"": "model.diffusion_model."})

    def process_vae_state_dict_for_saving(self, state_dict: dict) -> dict:
        return state_dict_prefix_replace(state_dict, {"": self.vae_key_prefix[0]})

    def set_inference_dtype(self, dtype: torch.dtype, manual_cast_dtype: torch.dtype | None) -> None:
        self.unet_config["dtype"] = dtype
        self.manual_cast_dtype = manual_cast_dtype


__all__ = ["BASE", "ClipTarget"]
