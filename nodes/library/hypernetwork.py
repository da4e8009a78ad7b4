"""ComfyUI's comfy_extras.nodes_hypernetwork: HypernetworkLoader. A hypernetwork file (A1111's format, a torch
pickle: {width: [key module state dict, value module state dict], "activation_func": ..., "is_layer_norm": ...,
...}) holds, per attention input width, two small MLPs; in every self- and cross-attention whose key input has
that width, key += mlp_k(key) * strength and value += mlp_v(value) * strength.

The MODEL carries the file (path, content digest, strength) as an attn1 and an attn2 patch
(nodes.modelfns.network_patches); the executor reads and builds the MLPs once per file and device. Dropout
layers are built in evaluation mode, so a step gives the same result wherever it runs (ComfyUI leaves them in
training mode, which only matters for the rare files trained with dropout)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import torch
from torch import nn

from cluster.refs import ModelRef, file_digest
from nodes.inputs import require_model
from nodes.loaders import model_file
from nodes.modelfns.network_patches import with_network_patch
from nodes.models.errors import ModelLoadError
from nodes.models.safetensors_io import is_torch_pickle
from nodes.workspace import active

MODULE = "comfy_extras.nodes_hypernetwork"
log = logging.getLogger(__name__)
ACTIVATIONS = {
    "linear": nn.Identity,
    "relu": nn.ReLU,
    "leakyrelu": nn.LeakyReLU,
    "elu": nn.ELU,
    "swish": nn.Hardswish,
    "tanh": nn.Tanh,
    "sigmoid": nn.Sigmoid,
    "softsign": nn.Softsign,
    "mish": nn.Mish,
}


@lru_cache(maxsize=4)
def read_hypernetwork(path: str, digest: str) -> dict:
    """The file's content (keyed by digest, so a changed file is read again)."""
    if not is_torch_pickle(path):
        raise ModelLoadError(path, "a hypernetwork is a torch pickle (.pt); this file is not")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises many types for a bad pickle
        raise ModelLoadError(path, f"cannot read the hypernetwork ({type(e).__name__}: {e})") from None


def _mlp(weights: dict[str, torch.Tensor], sd: dict) -> nn.Sequential:
    """The layers in the order of the state dict's ".weight" keys: linear [activation] [layer norm] [dropout]."""
    activation = ACTIVATIONS[sd.get("activation_func", "linear")]
    layer_norm, dropout = sd.get("is_layer_norm", False), sd.get("use_dropout", False)
    names = [k[: -len(".weight")] for k in weights if k.endswith(".weight")]
    layers: list[nn.Module] = []
    i = 0
    while i < len(names):
        last, penultimate = i == len(names) - 1, i == len(names) - 2
        w, b = weights[f"{names[i]}.weight"], weights[f"{names[i]}.bias"]
        linear = nn.Linear(w.shape[1], w.shape[0])
        linear.load_state_dict({"weight": w, "bias": b})
        layers.append(linear)
        if sd.get("activation_func", "linear") != "linear" and (not last or sd.get("activate_output", False)):
            layers.append(activation())
        if layer_norm:
            i += 1
            ln_w, ln_b = weights[f"{names[i]}.weight"], weights[f"{names[i]}.bias"]
            norm = nn.LayerNorm(ln_w.shape[0])
            norm.load_state_dict({"weight": ln_w, "bias": ln_b})
            layers.append(norm)
        if dropout and not last and (not penultimate or sd.get("last_layer_dropout", False)):
            layers.append(nn.Dropout(p=0.3))
        i += 1
    return nn.Sequential(*layers).eval()


def supported(sd: dict) -> bool:
    return sd.get("activation_func", "linear") in ACTIVATIONS


@lru_cache(maxsize=8)
def hypernetwork(path: str, digest: str, device: str, dtype: torch.dtype) -> dict[int, tuple[nn.Module, nn.Module]]:
    """{input width: (key MLP, value MLP)} on a device."""
    sd = read_hypernetwork(path, digest)
    out = {}
    for name, pair in sd.items():
        try:
            width = int(name)
        except (TypeError, ValueError):
            continue
        out[width] = tuple(_mlp(pair[i], sd).to(device=device, dtype=dtype) for i in (0, 1))
    return out


@dataclass(frozen=True)
class HypernetworkPatch:
    """attn1_patch / attn2_patch: k += mlp_k(k) * strength, v += mlp_v(v) * strength for k's width."""

    path: str
    digest: str
    strength: float

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, options: dict) -> tuple:
        nets = hypernetwork(self.path, self.digest, str(k.device), k.dtype)
        pair = nets.get(k.shape[-1])
        if pair is not None:
            k = k + pair[0](k) * self.strength
            v = v + pair[1](v) * self.strength
        return q, k, v


class HypernetworkLoader:
    RELATIVE_PYTHON_MODULE = MODULE
    RETURN_TYPES = ("MODEL",)
    FUNCTION = "load_hypernetwork"
    CATEGORY = "loaders"
    DESCRIPTION = "Applies a hypernetwork (small MLPs on the attention keys and values) to the diffusion model."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL",),
                "hypernetwork_name": (active().list_files("hypernetworks"),),
                "strength": ("FLOAT", {"default": 1.0, "min": -10.0, "max": 10.0, "step": 0.01}),
            }
        }

    def load_hypernetwork(self, model: Any, hypernetwork_name: str, strength: float) -> tuple[ModelRef]:
        require_model(model)
        path = model_file("hypernetworks", hypernetwork_name, "hypernetwork_name")
        digest = file_digest(path)
        sd = read_hypernetwork(str(path), digest)
        if not supported(sd):  # ComfyUI logs it and returns the model unpatched
            log.error("Unsupported hypernetwork activation %r in %s", sd.get("activation_func"), path)
            return (model,)
        patch = HypernetworkPatch(str(path), digest, float(strength))
        return (with_network_patch(with_network_patch(model, "attn1_patch", patch), "attn2_patch", patch),)


NODE_CLASS_MAPPINGS = {"HypernetworkLoader": HypernetworkLoader}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
