"""LoRA merging: kohya/ComfyUI files (`lora_unet_*`, `lora_te_*`, `lora_te1_/lora_te2_`, lora_down/lora_up/
alpha) and diffusers/peft ones (`.lora_A/.lora_B`), merged into a state dict with our module's names:
W += strength * alpha / rank * up @ down. LyCORIS's LoHa (`hada_w1_a` ...: (w1a @ w1b) * (w2a @ w2b), alpha over
w1b's rank) and LoKr (`lokr_w1` or `lokr_w1_a/_b`, `lokr_w2` or `lokr_w2_a/_b`: kron(w1, w2), alpha over the rank
of a factorised side, else 1) and full differences (`.diff`) merge as the newest ComfyUI's weight adapters
(comfy/weight_adapter/loha.py, lokr.py; comfy/lora.py's diff patches) compute them; their CP-decomposed (`hada_t1`,
`lokr_t2`), DoRA (`dora_scale`) and Tucker (`lora_mid`) forms and `set_weight` are refused by name. A module's bias
difference (`diff_b`, lightx2v's Wan LoRAs carry them) is added to its layer's bias, as ComfyUI does."""

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
    **{f".hada_w{i}_{ab}": f"hada_w{i}_{ab}" for i in (1, 2) for ab in "ab"},
    **{f".lokr_w{i}{ab}": f"lokr_w{i}{ab}" for i in (1, 2) for ab in ("", "_a", "_b")},
    ".diff": "diff",
    # forms not merged here: read so that they are refused by name instead of ignored
    ".hada_t1": "hada_t1",
    ".hada_t2": "hada_t2",
    ".lokr_t2": "lokr_t2",
    ".dora_scale": "dora_scale",
    ".lora_mid.weight": "lora_mid",
    ".diff_b": "diff_b",
    ".set_weight": "set_weight",
}
_UNSUPPORTED = ("hada_t1", "hada_t2", "lokr_t2", "dora_scale", "lora_mid", "set_weight")
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
    if not any(adapter_kind(m) or "diff_b" in m for m in mods.values()):
        raise ModelLoadError(
            path, "not a LoRA file (no lora_down/lora_up or lora_A/lora_B weight pairs, LoHa, LoKr or diff weights)"
        )
    return mods


def adapter_kind(mod: dict[str, torch.Tensor]) -> str | None:
    """ "lora", "loha", "lokr" or "diff" for a module with that adapter's weights complete (ComfyUI's adapters,
    tried in its order); None otherwise."""
    if "up" in mod and "down" in mod:
        return "lora"
    if all(f"hada_w{i}_{ab}" in mod for i in (1, 2) for ab in "ab"):
        return "loha"
    sides = [f"lokr_w{i}" in mod or (f"lokr_w{i}_a" in mod and f"lokr_w{i}_b" in mod) for i in (1, 2)]
    if any(f"lokr_w{i}{ab}" in mod for i in (1, 2) for ab in ("", "_a")):
        return "lokr" if all(sides) else None
    return "diff" if "diff" in mod else None


def _lokr_side(mod: dict[str, torch.Tensor], i: int) -> tuple[torch.Tensor, int | None]:
    """(LoKr's w1 or w2, the rank when it is factorised)."""
    if f"lokr_w{i}" in mod:
        return mod[f"lokr_w{i}"].float(), None
    a, b = mod[f"lokr_w{i}_a"].float(), mod[f"lokr_w{i}_b"].float()
    return a @ b, b.shape[0]


def _adapter_delta(mod: dict[str, torch.Tensor], kind: str) -> tuple[torch.Tensor, float]:
    """(the unscaled difference, its scale) of one module, as ComfyUI's weight adapters compute them."""
    alpha = float(mod["alpha"]) if "alpha" in mod else None
    if kind == "lora":
        up, down = mod["up"].float(), mod["down"].float()
        return up.flatten(1) @ down.flatten(1), alpha / down.shape[0] if alpha is not None else 1.0
    if kind == "loha":
        w1b = mod["hada_w1_b"].float()
        m1 = mod["hada_w1_a"].float() @ w1b
        m2 = mod["hada_w2_a"].float() @ mod["hada_w2_b"].float()
        return m1 * m2, alpha / w1b.shape[0] if alpha is not None else 1.0
    if kind == "lokr":
        (w1, rank1), (w2, rank2) = _lokr_side(mod, 1), _lokr_side(mod, 2)
        rank = rank2 if rank2 is not None else rank1  # ComfyUI reads w2's rank last
        if w2.dim() == 4:
            w1 = w1[:, :, None, None]
        return torch.kron(w1, w2), alpha / rank if alpha is not None and rank is not None else 1.0
    return mod["diff"].float(), 1.0


def lora_delta(mod: dict[str, torch.Tensor], weight: torch.Tensor, name: str, path: str) -> torch.Tensor:
    """The module's difference (alpha / rank * up @ down for a LoRA; LoHa, LoKr and diff as ComfyUI computes
    them) in `weight`'s shape (float32); refuses a shape that does not fit."""
    unsupported = [part for part in _UNSUPPORTED if part in mod]
    if unsupported:
        raise ModelLoadError(path, f"LoRA weight {name} has {unsupported[0]}, a form not supported yet")
    kind = adapter_kind(mod)
    if kind is None:
        raise ModelLoadError(path, f"LoRA weight {name} lacks its up or down matrix (or its LoHa / LoKr factors)")
    delta, scale = _adapter_delta(mod, kind)
    if kind == "diff" and delta.shape != weight.shape:
        raise ModelLoadError(
            path, f"LoRA weight {name} has shape {tuple(delta.shape)}, the model's is {tuple(weight.shape)}"
        )
    if delta.shape[0] != weight.shape[0] or delta.numel() != weight.numel():
        raise ModelLoadError(
            path,
            f"LoRA weight {name} has shape {tuple(delta.shape)}, the model's is "
            f"{tuple(weight.shape)}: this LoRA is for another architecture",
        )
    return (delta * scale).reshape(weight.shape)


def _merge_bias_difference(
    out: dict[str, torch.Tensor], diff: torch.Tensor, target: str | WeightSlice, name: str, patch: Patch
) -> None:
    """ComfyUI's diff_b: strength x the difference added to the bias beside the target weight."""
    bias = target[: -len(".weight")] + ".bias" if isinstance(target, str) and target.endswith(".weight") else None
    if bias is None or bias not in out:
        raise ModelLoadError(patch.path, f"LoRA weight {name} has a bias difference (diff_b) but its layer no bias")
    if diff.shape != out[bias].shape:
        raise ModelLoadError(
            patch.path,
            f"LoRA bias {name}.diff_b has shape {tuple(diff.shape)}, the model's is {tuple(out[bias].shape)}",
        )
    if patch.strength != 0.0:
        out[bias] = out[bias].float() + patch.strength * diff.float()


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
            target = targets.names[name]
            key = target.key if isinstance(target, WeightSlice) else target
            if "diff_b" in mod:
                _merge_bias_difference(out, mod["diff_b"], target, name, patch)
                if adapter_kind(mod) is None and not any(part in mod for part in _UNSUPPORTED):
                    count += 1
                    continue  # a bias difference alone
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
