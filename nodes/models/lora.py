"""LoRA merging: kohya/ComfyUI files (`lora_unet_*`, `lora_te_*`, `lora_te1_/lora_te2_`, lora_down/lora_up/
alpha) and diffusers/peft ones (`.lora_A/.lora_B`), merged into a state dict with our module's names:
W += strength * alpha / rank * up @ down."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from cluster.refs import Patch

from .errors import ModelLoadError
from .safetensors_io import load_state_dict

_PARTS = {
    ".lora_down.weight": "down",
    ".lora_up.weight": "up",
    ".lora_A.weight": "down",
    ".lora_B.weight": "up",
    ".lora.down.weight": "down",
    ".lora.up.weight": "up",
    ".lora_linear_layer.down.weight": "down",
    ".lora_linear_layer.up.weight": "up",
    ".alpha": "alpha",
}
UNET_FAMILY = ("lora_unet_", "unet.", "diffusion_model.", "model.diffusion_model.")
TE_FAMILY = ("lora_te_", "lora_te1_", "lora_te2_", "text_encoder.", "text_encoder_2.")


@dataclass(frozen=True)
class WeightSlice:
    """A LoRA target that is part of a fused weight: `length` entries from `start` along `dim` of `key` (ComfyUI's
    (key, (dim, start, length)) offset targets, e.g. a separate to_q LoRA on a fused qkv)."""

    key: str
    dim: int
    start: int
    length: int


@dataclass
class LoraTargets:
    """Names a LoRA may use for one component -> the weight key in our state dict (or a slice of one). `family`
    are the name prefixes that address this component, so keys for the other component are skipped, not refused."""

    family: tuple[str, ...]
    names: dict[str, str | WeightSlice]

    def add(self, weight_key: str | WeightSlice, *aliases: str) -> None:
        for a in aliases:
            self.names[a] = weight_key


def unet_targets(diffusers_to_ldm: dict[str, str]) -> LoraTargets:
    """UNet LoRA names: kohya from diffusers paths (SD1 trainers) or ldm paths (SDXL trainers), and peft."""
    t = LoraTargets(UNET_FAMILY, {})
    for dif, ldm in diffusers_to_ldm.items():
        if not dif.endswith(".weight"):
            continue
        d, l = dif[: -len(".weight")], ldm[: -len(".weight")]
        t.add(
            dif,
            "lora_unet_" + d.replace(".", "_"),
            "lora_unet_" + l.replace(".", "_"),
            "unet." + d,
            "diffusion_model." + l,
            "model.diffusion_model." + l,
        )
    return t


def clip_targets(weight_keys: list[str], kohya: str, peft: str, out: LoraTargets | None = None) -> LoraTargets:
    """CLIP LoRA names for flattened HF keys (`encoder.layers.0.self_attn.q_proj.weight`), e.g.
    kohya `lora_te_text_model_encoder_layers_0_self_attn_q_proj`, peft `text_encoder.text_model....`."""
    t = out or LoraTargets(TE_FAMILY, {})
    for key in weight_keys:
        if key.endswith(".weight"):
            path = "text_model." + key[: -len(".weight")]
            t.add(key, kohya + path.replace(".", "_"), peft + path)
    return t


def lora_modules(lora: dict[str, torch.Tensor], path: str) -> dict[str, dict[str, torch.Tensor]]:
    """LoRA module name -> its {"up", "down", "alpha"} tensors; refuses a file with no up/down pair."""
    mods: dict[str, dict[str, torch.Tensor]] = {}
    for k, v in lora.items():
        for suffix, part in _PARTS.items():
            if k.endswith(suffix):
                mods.setdefault(k[: -len(suffix)], {})[part] = v
                break
    if not any("down" in m and "up" in m for m in mods.values()):
        raise ModelLoadError(path, "not a LoRA file (no lora_down/lora_up or lora_A/lora_B weight pairs)")
    return mods


def lora_delta(mod: dict[str, torch.Tensor], weight: torch.Tensor, name: str, path: str) -> torch.Tensor:
    """alpha / rank * up @ down in `weight`'s shape (float32); refuses a shape that does not fit."""
    up, down = mod["up"].float(), mod["down"].float()
    rank = down.shape[0]
    scale = float(mod["alpha"]) / rank if "alpha" in mod else 1.0
    delta = up.flatten(1) @ down.flatten(1)
    if delta.shape[0] != weight.shape[0] or delta.numel() != weight.numel():
        raise ModelLoadError(
            path,
            f"LoRA weight {name} has shape {tuple(delta.shape)}, the model's is "
            f"{tuple(weight.shape)}: this LoRA is for another architecture",
        )
    return (delta * scale).reshape(weight.shape)


def merge_loras(
    patches: tuple[Patch, ...],
    targets: LoraTargets,
    sd: dict[str, torch.Tensor],
    convert: Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]] | None = None,
) -> tuple[dict[str, torch.Tensor], int]:
    """Merge every patch's weights for this component into `sd` (a new dict; the input and its tensors are
    left untouched). Returns (state dict, number of weights patched). A LoRA whose names for this component
    do not all resolve, or whose shapes disagree, is refused: it was made for another model. `convert` renames a
    family's own LoRA layouts first (ComfyUI's lora_convert)."""
    out = dict(sd)
    count = 0
    for patch in patches:
        lora = load_state_dict(patch.path, patch.digest)
        mods = lora_modules(convert(lora) if convert is not None else lora, patch.path)
        known = [n for n in mods if n.startswith(UNET_FAMILY + TE_FAMILY + targets.family)]
        if not known:
            raise ModelLoadError(
                patch.path,
                "LoRA names match no known layout (expected lora_unet_/lora_te_ or unet./text_encoder. prefixes)",
            )
        mine = [n for n in mods if n.startswith(targets.family)]
        unmatched = [n for n in mine if n not in targets.names]
        if unmatched:
            raise ModelLoadError(
                patch.path,
                f"{len(unmatched)} of the LoRA's {len(mine)} weights for this "
                f"model match no layer (e.g. {unmatched[0]}): the LoRA is for "
                "another architecture",
            )
        for name in mine:
            mod = mods[name]
            if "up" not in mod or "down" not in mod:
                raise ModelLoadError(patch.path, f"LoRA weight {name} lacks its up or down matrix")
            target = targets.names[name]
            key = target.key if isinstance(target, WeightSlice) else target
            weight = out[key]
            if isinstance(target, WeightSlice):
                weight = weight.narrow(target.dim, target.start, target.length)
            delta = lora_delta(mod, weight, name, patch.path)
            if patch.strength != 0.0:
                # Merged in float32: the module is built in float32 anyway, and fp16 sums lose the delta.
                if isinstance(target, WeightSlice):
                    merged = out[key].float()  # a new tensor (or the input's float32 one: copied before writing)
                    merged = merged.clone() if merged is sd.get(key) else merged
                    merged.narrow(target.dim, target.start, target.length).add_(patch.strength * delta)
                    out[key] = merged
                else:
                    out[key] = out[key].float() + patch.strength * delta
            count += 1
    return out, count
