"""SeedVR2's transformer as a sampler's diffusion model (UNETLoader): the published 3B / 7B files, bare or under
model.diffusion_model., float or in ComfyUI's int8 ConvRot quantization (the templates' seedvr2_*_int8_convrot,
dequantized once at load as nodes.models.comfy_quant does for LTX-2.5).

As the newest ComfyUI runs it (comfy/model_base.py SeedVR2, comfy/supported_models.py SeedVR2): a flow model
(ModelSamplingDiscreteFlow, shift 1, timestep = sigma x 1000) on the VAE's 16-channel [B,16,T,H,W] latents, which the
VAE scales itself (latent format unscaled); SeedVR2Conditioning's `condition` (the clean latent and a ones channel)
rides on the conditioning and joins the input; the text is the conditioning's own embeddings, each row its own
length."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from cluster.refs import ModelRef
from nodes.arch import latent_format, sampling_config
from nodes.models import comfy_quant
from nodes.models.components import DiffusionModel
from nodes.models.errors import ModelLoadError
from nodes.models.seedvr2_dit import SeedVR2DiT, load_seedvr2_dit

PREFIXES = ("model.diffusion_model.", "diffusion_model.", "")


@dataclass
class SeedVR2DiffusionModel(DiffusionModel):
    def apply(self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
        if cond.get("control") is not None:
            raise NotImplementedError("ControlNet is not supported for SeedVR2 models")
        condition = cond.get("condition")
        if condition is None:
            raise ValueError("SeedVR2 needs its conditioning from SeedVR2Conditioning (the latent to upscale)")
        b = x.shape[0]
        context = cond["context"]
        rows = [context[i if context.shape[0] == b else 0] for i in range(b)]
        condition = condition.to(x.device)
        if condition.shape[0] != b:
            condition = condition.expand(b, *condition.shape[1:])
        t = torch.as_tensor(timestep, dtype=torch.float32).reshape(-1)
        t = t.expand(b) if t.numel() == 1 else t
        module: SeedVR2DiT = self.module
        return module(x, t, rows, condition).float()


def transformer_state_dict(state_dict: Mapping[str, torch.Tensor], path: str | None) -> dict[str, torch.Tensor]:
    """The transformer's tensors without their prefix, dequantized to float32 if the file is quantized."""
    prefix = next((p for p in PREFIXES if f"{p}vid_in.proj.weight" in state_dict), None)
    if prefix is None:
        raise ModelLoadError(path, "not a SeedVR2 transformer (no vid_in.proj.weight)")
    sd = {k[len(prefix) :]: v for k, v in state_dict.items() if k.startswith(prefix)}
    if comfy_quant.is_quantized(sd):
        sd = comfy_quant.dequantize(sd, path, torch.float32)
    return sd


def load_diffusion_model(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> SeedVR2DiffusionModel:
    """SeedVR2's 3B or 7B transformer, float32 compute as ComfyUI runs it on a CPU."""
    path = ref.sources[0] if ref.sources else None
    if ref.patches:
        raise ModelLoadError(path, "LoRAs on SeedVR2 transformers are not supported yet")
    sd = transformer_state_dict(state_dict, path)
    try:
        module = load_seedvr2_dit(sd, torch.float32)
    except (KeyError, ValueError, RuntimeError) as e:
        raise ModelLoadError(path, f"not a usable SeedVR2 transformer: {e}") from None
    return SeedVR2DiffusionModel(
        arch="seedvr2",
        module=module,
        latent_format=latent_format("seedvr2"),
        sampling=dict(sampling_config("seedvr2")),
        config={"variant": "7B" if module.spec.is_7b else "3B", "width": module.spec.width},
    )


def read_text_embeddings(path: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The transformer file's positive and negative text embeddings, float32, read without loading the rest."""
    from safetensors import safe_open

    with safe_open(path, framework="pt") as f:
        keys = set(f.keys())
        for prefix in PREFIXES:
            names = (f"{prefix}positive_conditioning", f"{prefix}negative_conditioning")
            if all(n in keys for n in names):
                return tuple(f.get_tensor(n).float() for n in names)  # type: ignore[return-value]
    raise ValueError(f"{path} holds no SeedVR2 text embeddings (positive_conditioning / negative_conditioning)")
