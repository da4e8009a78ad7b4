"""ComfyUI's weight patches (ModelPatcher.add_patches) on this backend's MODELs: LoRA patches as comfy.lora.load_lora
gives them are written as a LoRA file (named by its content, comfy.state_dict_files) whose module names are the
model's own keys ("diffusion_model.<path>"), which the executors' LoRA merge reads as it reads LoraLoader's files.
Patch kinds that file cannot carry (diff / set, LoCon's mid weight, DoRA, a reshape, weight adapters, offsets,
a scaled original weight) raise NotALoraFilePatch, which the MODEL and CLIP proxies report as UnsupportedFeature."""

from __future__ import annotations

from typing import Any

import torch

from cluster.refs import Patch, file_digest

_WHY = "weight patches reach the executors as LoRA files, which hold up / down / alpha per weight"


class NotALoraFilePatch(Exception):
    """A patch a LoRA file cannot carry: `feature` names it (after the caller's "MODEL.add_patches"), `why` says
    why."""

    def __init__(self, feature: str, why: str = _WHY) -> None:
        super().__init__(f"{feature}: {why}")
        self.feature, self.why = feature, why


def _lora_entries(key: Any, patch: Any) -> dict[str, torch.Tensor]:
    """The LoRA file entries of one ("lora", (up, down, alpha, mid, dora_scale, reshape)) patch on `key`."""
    if not isinstance(key, str) or not key.endswith(".weight"):
        raise NotALoraFilePatch(f"on {key!r}", "patches on whole weights (no offsets) only")
    if not (isinstance(patch, tuple) and len(patch) == 2 and patch[0] == "lora"):
        kind = patch[0] if isinstance(patch, tuple) and patch and isinstance(patch[0], str) else type(patch).__name__
        raise NotALoraFilePatch(f"with a {kind!r} patch")
    up, down, alpha, *rest = patch[1]
    extra = [name for name, v in zip(("LoCon mid weight", "DoRA scale", "reshape"), rest) if v is not None]
    if extra:
        raise NotALoraFilePatch(f"with a LoRA patch carrying a {extra[0]}")
    name = key[: -len(".weight")]
    out = {f"{name}.lora_up.weight": up, f"{name}.lora_down.weight": down}
    if alpha is not None:
        out[f"{name}.alpha"] = torch.tensor(float(alpha))
    return out


def as_lora_file(
    patches: dict, strength_patch: float, strength_model: float, model_keys: set[str]
) -> tuple[Patch | None, list]:
    """(the LoRA file patch at strength_patch, or None when no key is the model's; the keys patched)."""
    from comfy_bridge.compat.comfy.state_dict_files import state_dict_file

    if strength_model != 1.0:
        raise NotALoraFilePatch("with strength_model != 1")
    sd: dict[str, torch.Tensor] = {}
    patched = []
    for key, patch in patches.items():
        if (key[0] if isinstance(key, tuple) else key) in model_keys:  # ComfyUI skips keys the model lacks
            sd.update(_lora_entries(key, patch))
            patched.append(key)
    if not sd:
        return None, patched
    path = state_dict_file(sd, "MODEL.add_patches")
    return Patch(str(path), file_digest(path), float(strength_patch)), patched


def as_clip_lora_file(
    patches: dict, strength_patch: float, strength_model: float, towers: list[str], model_keys: set[str]
) -> tuple[Patch | None, list]:
    """CLIP.add_patches' LoRA file: patches on the towers' layers (ComfyUI's "clip_l.transformer.text_model...."
    keys) renamed to the kohya names this backend's CLIP merge reads (lora_te_ for one tower, lora_te1_ / lora_te2_
    for SDXL's two, in `towers` order); patches on other keys (text projection, logit scale) refuse by name."""
    from comfy_bridge.compat.comfy.state_dict_files import state_dict_file

    if strength_model != 1.0:
        raise NotALoraFilePatch("with strength_model != 1")
    sd: dict[str, torch.Tensor] = {}
    patched = []
    for key, patch in patches.items():
        base = key[0] if isinstance(key, tuple) else key
        if base not in model_keys:
            continue
        tower, _, rest = str(base).partition(".transformer.")
        if tower not in towers or not rest.startswith("text_model."):
            raise NotALoraFilePatch(f"on {base!r}", "patches on the towers' text_model layers only")
        kohya = "lora_te_" if len(towers) == 1 else f"lora_te{towers.index(tower) + 1}_"
        entries = _lora_entries(key, patch)
        module = kohya + rest[: -len(".weight")].replace(".", "_")
        sd.update({module + k[len(base) - len(".weight") :]: v for k, v in entries.items()})
        patched.append(key)
    if not sd:
        return None, patched
    path = state_dict_file(sd, "CLIP.add_patches")
    return Patch(str(path), file_digest(path), float(strength_patch)), patched
