"""Model patches (ComfyUI's models/model_patches folder, ModelPatchLoader): small networks that act inside a
diffusion model's forward pass rather than as a model of their own.

Told apart by the keys of the files their authors publish, as ComfyUI's ModelPatchLoader tells them apart
(comfy_extras/nodes_model_patch.py, 0.3.64 and today):
- `qwen_diffsynth`: DiffSynth-Studio's block-wise ControlNets for Qwen-Image (Comfy-Org/Qwen-Image-DiffSynth-
  ControlNets: canny, depth, inpaint). Keys `img_in.{weight,bias}` (the 2x2-patched control latent, 64 features
  plus 4 per extra mask channel, to the transformer's width) and per transformer block
  `controlnet_blocks.{i}.{x_rms,y_rms}.weight`, `controlnet_blocks.{i}.{input,output}_proj.{weight,bias}`;
- `uso_projector`: ByteDance USO's SigLIP style projector (`feature_embedder.*`, nodes.models.uso_projector);
- `zimage_fun_control`: alibaba-pai's Z-Image-Turbo Fun ControlNet Union (`control_all_x_embedder.*`; the first
  release's layout, nodes.models.zimage_fun_control; its 2.x layouts are refused by name); `anima_lllite`: kohya-ss' ControlNet-LLLite for Anima (`lllite_conditioning1.*`, nodes.models.anima_lllite);
  `wan_multitalk`: MultiTalk / InfiniteTalk's audio patch for Wan 2.1 (`audio_proj.*`, nodes.models.wan_multitalk);
  the refused kinds are the kinds today's ComfyUI added later (Wan's Uni3C, SUPIR), which are
  named by their keys too (comfy_extras/nodes_model_patch.py at 4f8cf3e2).
Sizes (width, extra channels, block count) are read from the tensors, so tiny files in the real layout load."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch
from torch import nn

from cluster.refs import ModelRef

from .batch_invariant import make_batch_invariant
from .errors import ModelLoadError

QWEN_DIFFSYNTH = "qwen_diffsynth"
USO_PROJECTOR = "uso_projector"
ZIMAGE_FUN_CONTROL = "zimage_fun_control"
ANIMA_LLLITE = "anima_lllite"
WAN_MULTITALK = "wan_multitalk"  # MultiTalk / InfiniteTalk's audio patch (nodes.models.wan_multitalk)
# a published file's marker key -> its kind (ComfyUI's ModelPatchLoader tests the same keys)
MARKERS = {
    "lllite_conditioning1.conv1.weight": ANIMA_LLLITE,
    "controlnet_blocks.0.y_rms.weight": QWEN_DIFFSYNTH,
    "feature_embedder.mid_layer_norm.bias": USO_PROJECTOR,
    "control_all_x_embedder.2-1.weight": ZIMAGE_FUN_CONTROL,
    "controlnet_patch_embedding.weight": "wan_uni3c",
    "audio_proj.proj1.weight": WAN_MULTITALK,
    "control_model.input_hint_block.0.weight": "supir",
    "model.control_model.input_hint_block.0.weight": "supir",
}
KIND_NAMES = {
    ANIMA_LLLITE: "an Anima LLLite patch",
    QWEN_DIFFSYNTH: "a Qwen-Image DiffSynth ControlNet",
    USO_PROJECTOR: "a USO style projector",
    ZIMAGE_FUN_CONTROL: "a Z-Image Fun ControlNet",
    "wan_uni3c": "a Wan Uni3C ControlNet",
    WAN_MULTITALK: "a Wan MultiTalk / InfiniteTalk audio patch",
    "supir": "a SUPIR model",
}
LATENT_CHANNELS = 16  # the Qwen-Image (Wan 2.1) VAE's latent channels the control image is encoded to


def patch_kind(keys: Iterable[str]) -> str | None:
    """Which model patch a file's keys make, or None."""
    keys = set(keys)
    return next((kind for marker, kind in MARKERS.items() if marker in keys), None)


def extra_channels(shapes: Mapping[str, tuple[int, ...]]) -> int:
    """A DiffSynth ControlNet's mask channels beside the 16 latent ones (the inpaint file has one: 4 features of
    a 2x2 patch), from img_in's input width."""
    extra = shapes["img_in.weight"][1] - 4 * LATENT_CHANNELS
    if extra < 0 or extra % 4:
        raise ValueError(f"img_in takes {shapes['img_in.weight'][1]} features, not 64 plus whole 2x2 mask patches")
    return extra // 4


class ControlBlock(nn.Module):
    """One transformer block's control: the block's image tokens and the control tokens, each RMS-normed,
    summed, through Linear-GELU-Linear; the result, scaled, is added to the image tokens."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.x_rms = nn.RMSNorm(dim, eps=1e-6)
        self.y_rms = nn.RMSNorm(dim, eps=1e-6)
        self.input_proj = nn.Linear(dim, dim)
        self.output_proj = nn.Linear(dim, dim)

    def forward(self, img: torch.Tensor, control: torch.Tensor) -> torch.Tensor:
        h = self.input_proj(self.x_rms(img) + self.y_rms(control))
        return self.output_proj(nn.functional.gelu(h))


class BlockWiseControlNet(nn.Module):
    """DiffSynth's Qwen-Image ControlNet: `img_in` embeds the patched control latent once, then block i's
    output image tokens get `controlnet_blocks[i](tokens, embedded control) * strength` added."""

    def __init__(self, in_dim: int, dim: int, blocks: int) -> None:
        super().__init__()
        self.img_in = nn.Linear(in_dim, dim)
        self.controlnet_blocks = nn.ModuleList(ControlBlock(dim) for _ in range(blocks))


def load_model_patch(ref: ModelRef) -> nn.Module:
    """The patch network of a MODEL_PATCH ref's file."""
    from .safetensors_io import load_state_dict

    return build_model_patch(load_state_dict(ref.sources[0], ref.digests[0]), ref.sources[0])


def build_model_patch(sd: Mapping[str, torch.Tensor], path: str | None = None) -> nn.Module:
    """The patch network of a model-patch state dict (float32, as ComfyUI computes it on a CPU; USO's projector in
    its file's dtype, as ComfyUI runs it), batch-invariant as the denoisers it patches: it runs inside their
    batched steps, and a CFG split evaluates each side alone."""
    return make_batch_invariant(_patch_network(sd, path))


def _patch_network(sd: Mapping[str, torch.Tensor], path: str | None) -> nn.Module:
    from .safetensors_io import build_module

    kind = patch_kind(sd)
    if kind == ZIMAGE_FUN_CONTROL:
        from . import zimage_fun_control as fun

        reason = fun.refuse_reason(sd)
        if reason is not None:
            raise ModelLoadError(path, reason)
        try:
            size = fun.sizes(sd)
        except (KeyError, ValueError) as e:
            raise ModelLoadError(path, f"not a usable Z-Image Fun ControlNet: {e}") from None
        return build_module(
            lambda: fun.ZImageFunControl(**size), fun.to_module_names(sd), path, "Z-Image Fun ControlNet"
        )
    if kind == ANIMA_LLLITE:
        from .anima_lllite import build
        from .safetensors_io import shapes_of

        return build(sd, shapes_of(path)[1] if path else {}, path)
    if kind == WAN_MULTITALK:
        from .wan_multitalk import build

        return build(sd, path)
    if kind == USO_PROJECTOR:
        from .uso_projector import build_uso_projector

        return build_uso_projector(sd, path)
    if kind != QWEN_DIFFSYNTH:
        what = KIND_NAMES.get(kind, "no model patch ComfyUI knows")
        raise ModelLoadError(path, f"is {what}, which is not supported here")
    dim, in_dim = sd["img_in.weight"].shape
    blocks = len({k.split(".")[1] for k in sd if k.startswith("controlnet_blocks.")})
    return build_module(lambda: BlockWiseControlNet(in_dim, dim, blocks), dict(sd), path, "DiffSynth ControlNet")
