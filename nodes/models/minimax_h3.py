"""MiniMax H3 audio-video diffusion transformer from the single file ComfyUI users download
(diffusion_models/minimax_h3_*.safetensors from Comfy-Org/MiniMax-H3: the reference model's own key names,
`blocks.N.attn.qkv_proj`, `final_layer.video_out`, ..., bare or under `model.diffusion_model.`).

Key layout source: diffusers 0.42's `convert_minimax_h3_transformer_checkpoint_to_diffusers` (its detector key
`token_refiner.blocks.0.attn.qkv_proj.weight`, the stacked `[q; k; v]` rows of every published single file, the
`[gate; value]` SwiGLU rows) and the newest ComfyUI `comfy/ldm/minimax/model.py`, whose module names are these
keys. The network is diffusers' MiniMaxH3Transformer3DModel; sizes are read from the tensors. The "pruned"
files every MiniMax H3 template names are the curve form: `adaln_t_table` (the activated time embedding
tabulated over t) replaces the time embedder, and the AdaLN projections take it without an activation, as
ComfyUI's model reads them; diffusers refuses that form, so those modules' forwards are swapped here.

`apply` takes ComfyUI's view of one denoising evaluation of the text-to-video task, of first/last-frame
to video with one-frame keyframe latents, or of reference-to-video with reference image latents (no reference
videos or audio, no keyframe audio): the video latent [1, 24, T, H, W], the audio latent [1, 32, 2, A], the text
states and the video sigma. As ComfyUI's MiniMaxH3Model does, it packs [text | keyframes | reference images |
target audio | target video] into one sequence with rotary positions on one clock, runs the video rows at
t = 1 - sigma, the keyframe and reference rows pinned at t = 0.999 and the
audio rows on their own shifted schedule (sigma mapped from video shift 12 to audio shift 3 in closed form),
and returns the negated velocity (ComfyUI's flow convention: denoised = x - sigma * out). The sampler's audio
carry (ModelSamplingAV's audio_scale) is not applied here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from diffusers import MiniMaxH3Transformer3DModel
from diffusers.loaders.single_file_utils import (
    convert_minimax_h3_transformer_checkpoint_to_diffusers,
)
from diffusers.models.transformers.transformer_minimax_h3 import (
    MiniMaxH3AdaLayerNormModulation,
    MiniMaxH3AdaLayerNormOut,
)

from cluster.refs import Patch
from nodes.models.errors import ModelLoadError
from nodes.models.flux_keys import count_blocks, find_prefix, strip_prefix
from nodes.models.lora import UNET_FAMILY, LoraTargets, merge_loras

MARKER = "token_refiner.blocks.0.attn.qkv_proj.weight"  # diffusers' single-file detector key for minimax-h3
PRUNED_MARKER = "adaln_t_table"  # the curve-form ("pruned") files: no time embedder, a table of its curve
# FastVideo's FastH3 files add a VSA compression gate per block; the dense forward never reads it (ComfyUI keeps the
# module only for sparse-attention patches), so it is left out
VSA_GATE = ".attn.to_gate_compress."
PATCH = (1, 2, 2)
VIDEO_TAG, TEXT_TAG, AUDIO_TAG = 0, 1, 2
AUDIO_CHANNELS = 2  # stereo: the audio rows are packed channel-major
FRAME_PER_TOKEN = (1, 4, 4, 4, 4)  # pixel frames per latent frame, repeating (the VAE's 17k+5 grid)
FRAME_RESCALE = 5.0 / 3.0  # rotary time per pixel frame: 24 fps frames on the 40 Hz audio clock
SPATIAL_SCALE = 32.0
SIGMA_SHIFT_VIDEO = 12.0
SIGMA_SHIFT_AUDIO = 3.0
VISUAL_COND_AUG = 0.999  # keyframe rows are held at t = 0.999 (lightly noised), never denoised
_REQUIRED = (
    "video_patch_proj.weight",
    "audio_patch_proj.weight",
    "condition_proj.weight",
    "time_embedder.proj_in.weight",
    "time_embedder.proj_out.weight",
    "blocks.0.attn.q_norm.weight",
    "blocks.0.mlp.fc2.weight",
    "rope.inv_freq",
    "final_layer.video_out.weight",
)


def is_minimax_h3(keys: Iterable[str]) -> bool:
    """Whether a state dict's keys are a MiniMax H3 transformer in the published layout (any prefix)."""
    return find_prefix(keys, MARKER) is not None


def infer_config(sd: Mapping[str, torch.Tensor], path: str | None = None) -> dict[str, Any]:
    """MiniMaxH3Transformer3DModel's config from an (unprefixed) published-layout state dict's shapes."""
    curve = PRUNED_MARKER in sd
    missing = [k for k in _REQUIRED if k not in sd and not (curve and k.startswith("time_embedder."))]
    if missing:
        raise ModelLoadError(path, f"not a complete MiniMax H3 transformer: missing {', '.join(missing)}")
    hidden, video_patch_dim = sd["video_patch_proj.weight"].shape
    head_dim = int(sd["blocks.0.attn.q_norm.weight"].shape[0])
    inner = int(sd["blocks.0.attn.qkv_proj.weight"].shape[0]) // 3
    if video_patch_dim % math.prod(PATCH) or inner % head_dim:
        raise ModelLoadError(path, f"MiniMax H3 shapes do not fit its 1x2x2 patch and {head_dim}-wide heads")
    return {
        "num_attention_heads": inner // head_dim,
        "attention_head_dim": head_dim,
        "hidden_size": int(hidden),
        "num_layers": count_blocks(sd, "blocks"),
        "num_refiner_layers": count_blocks(sd, "token_refiner.blocks"),
        "ffn_dim": int(sd["blocks.0.mlp.fc2.weight"].shape[1]),
        "in_channels": int(video_patch_dim) // math.prod(PATCH),
        "patch_size": PATCH,
        "audio_in_channels": int(sd["audio_patch_proj.weight"].shape[1]),
        "text_dim": int(sd["condition_proj.weight"].shape[1]),
        "rope_freq_dim": int(sd["rope.inv_freq"].shape[0]),
        # a curve-form file has no time embedder: its table's width is the embedding's, the MLP's sizes are moot
        **(
            {"freq_dim": 2, "time_embed_hidden_dim": 1, "time_embed_dim": int(sd[PRUNED_MARKER].shape[1])}
            if curve
            else {
                "freq_dim": int(sd["time_embedder.proj_in.weight"].shape[1]),
                "time_embed_hidden_dim": int(sd["time_embedder.proj_in.weight"].shape[0]),
                "time_embed_dim": int(sd["time_embedder.proj_out.weight"].shape[0]),
            }
        ),
    }


def lora_targets(sd: Mapping[str, torch.Tensor]) -> LoraTargets:
    """The names a LoRA may give a weight of the published layout, as ComfyUI maps any model's weights:
    `diffusion_model.<module>` (the turbo LoRAs' comfyui files) and kohya's `lora_unet_<module with _>`."""
    targets = LoraTargets(UNET_FAMILY, {})
    for key in sd:
        if key.endswith(".weight"):
            stem = key.removesuffix(".weight")
            targets.add(
                key, "diffusion_model." + stem, "model.diffusion_model." + stem, "lora_unet_" + stem.replace(".", "_")
            )
    return targets


def load_transformer(
    sd: Mapping[str, torch.Tensor], path: str | None = None, loras: tuple[Patch, ...] = ()
) -> MiniMaxH3Transformer3DModel:
    """The transformer of a published MiniMax H3 file, in float32, `loras` merged in the file's names (before
    diffusers' converter splits the fused qkv rows). The file's own rope frequencies are kept (ComfyUI loads that
    buffer; diffusers would recompute it from a theta the file does not record)."""
    prefix = find_prefix(sd.keys(), MARKER)
    if prefix is None:
        raise ModelLoadError(path, f"not a MiniMax H3 transformer: no {MARKER}")
    sd = {k: v for k, v in strip_prefix(sd, prefix).items() if VSA_GATE not in k}
    if loras:
        sd, _ = merge_loras(loras, lora_targets(sd), sd)
    config = infer_config(sd, path)
    inv_freq = sd["rope.inv_freq"].to(torch.float32)
    table = sd.get(PRUNED_MARKER)
    converted = convert_minimax_h3_transformer_checkpoint_to_diffusers(
        {k: v.to(torch.float32) for k, v in sd.items() if k != PRUNED_MARKER}, config
    )
    with torch.device("meta"):
        model = MiniMaxH3Transformer3DModel(**config)
    if table is not None:
        _to_curve_form(model, int(table.shape[0]))
        converted["time_embedder.table"] = table.to(torch.float32)
    result = model.load_state_dict(converted, strict=False, assign=True)
    if result.missing_keys or result.unexpected_keys:
        raise ModelLoadError(
            path,
            f"MiniMax H3 file does not match its inferred shape: missing "
            f"{result.missing_keys[:5]}, unexpected {result.unexpected_keys[:5]}",
        )
    model.rope.register_buffer("inv_freq", inv_freq, persistent=False)
    return model.eval()


def diffusers_to_published(sd: Mapping[str, torch.Tensor], inv_freq: torch.Tensor) -> dict[str, torch.Tensor]:
    """The published single-file layout of a diffusers MiniMaxH3Transformer3DModel state dict (for demo files):
    the inverse of diffusers' converter for the stacked-qkv layout."""
    renames = [
        ("token_refiner.refiner_blocks.", "token_refiner.blocks."),
        ("time_embedder.linear_1.", "time_embedder.proj_in."),
        ("time_embedder.linear_2.", "time_embedder.proj_out."),
        ("audio_proj_in.", "audio_patch_proj."),
        ("context_embedder.", "condition_proj."),
        ("norm_out.norm.", "final_layer.norm."),
        ("norm_out.linear.", "final_layer.adaln_proj.linear."),
        ("audio_proj_out.", "final_layer.audio_out."),
        (".attn.norm_q.", ".attn.q_norm."),
        (".attn.norm_k.", ".attn.k_norm."),
        (".attn.to_out.0.", ".attn.out_proj."),
        (".ff.net.0.proj.", ".mlp.fc1."),
        (".ff.net.2.", ".mlp.fc2."),
    ]
    out: dict[str, torch.Tensor] = {"rope.inv_freq": inv_freq.clone()}
    for key, value in sd.items():
        if ".attn.to_k." in key or ".attn.to_v." in key:
            continue
        if key.startswith("transformer_blocks."):
            key = "blocks." + key[len("transformer_blocks.") :]
        elif key.startswith("proj_in."):
            key = "video_patch_proj." + key[len("proj_in.") :]
        elif key.startswith("proj_out."):
            key = "final_layer.video_out." + key[len("proj_out.") :]
        if ".attn.to_q." in key:
            value = torch.cat([sd[k] for k in _qkv_names(key)])
            key = key.replace(".attn.to_q.", ".attn.qkv_proj.")
        for old, new in renames:
            key = key.replace(old, new)
        if key.endswith(".mlp.fc1.weight"):  # diffusers' SwiGLU reads [value; gate], the file stores [gate; value]
            value = torch.cat(value.chunk(2, dim=0)[::-1])
        out[key] = value.clone()
    return out


def _qkv_names(published_q_key: str) -> list[str]:
    stem = (
        published_q_key.replace("blocks.", "transformer_blocks.", 1)
        if published_q_key.startswith("blocks.")
        else published_q_key
    )
    return [stem.replace(".attn.to_q.", f".attn.to_{p}.") for p in "qkv"]


class _CurveTimesteps(torch.nn.Module):
    """Stands in for the sinusoid: the curve is indexed by t itself."""

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        return t.to(torch.float32)


class _CurveTable(torch.nn.Module):
    """The time embedding of a curve-form file, as ComfyUI reads it: rows of the curve on an even grid of t in
    [0, 1], linearly interpolated (t clamped to the ends; t = 1 stays on the last interval)."""

    def __init__(self, rows: int, width: int) -> None:
        super().__init__()
        self.register_buffer("table", torch.empty(rows, width, dtype=torch.float32))

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        pos = t.clamp(0.0, 1.0) * (self.table.shape[0] - 1)
        low = pos.floor().long().clamp(max=self.table.shape[0] - 2)
        return torch.lerp(self.table[low], self.table[low + 1], (pos - low).unsqueeze(1))


class _CurveModulation(MiniMaxH3AdaLayerNormModulation):
    """A block's AdaLN projection in a curve-form file: the table already holds the activated embedding."""

    def forward(self, temb: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return self.linear(temb).view(-1, 6 * self.hidden_size).chunk(6, dim=-1)


class _CurveNormOut(MiniMaxH3AdaLayerNormOut):
    def forward(self, hidden_states: torch.Tensor, temb: torch.Tensor, timestep_indices: torch.Tensor) -> torch.Tensor:
        shift, scale = self.linear(temb).chunk(2, dim=-1)
        hidden_states = self.norm(hidden_states)
        return hidden_states * (1.0 + scale.index_select(0, timestep_indices)) + shift.index_select(0, timestep_indices)


def _to_curve_form(model: MiniMaxH3Transformer3DModel, rows: int) -> None:
    # diffusers has no curve form; its modules are kept (same weights, same keys) and only their
    # activation-taking forwards are swapped, so the rest of the network stays diffusers' own
    width = model.config.time_embed_dim
    model.time_proj = _CurveTimesteps()
    model.time_embedder = _CurveTable(rows, width).to("meta")
    for block in model.transformer_blocks:
        block.adaln_proj.__class__ = _CurveModulation
    model.norm_out.__class__ = _CurveNormOut


def time_shift_sigma(sigma: float, from_shift: float, to_shift: float) -> float:
    """A sigma of one shifted schedule mapped to the same base grid point of another: the inverse of
    sigma = s*b / (1 + (s-1)*b), then the other shift."""
    base = sigma / (from_shift + sigma * (1.0 - from_shift))
    return to_shift * base / (1.0 + (to_shift - 1.0) * base)


@dataclass(frozen=True)
class PackedLayout:
    """Where each stream's rows sit in the packed sequence, and their (t, h, w) rotary coordinates."""

    position_ids: torch.Tensor  # [S, 3] float64
    token_tags: torch.Tensor  # [S] long: 0 video, 1 text, 2 audio
    text_indices: torch.Tensor
    audio_indices: torch.Tensor
    video_indices: torch.Tensor


def _spatial_axis(dim: int, patch: int, sqrt_area: float) -> torch.Tensor:
    # dim // patch points spanning the canvas's share of a unit square centred on 0.5, right end excluded
    ratio = dim / sqrt_area
    n = dim // patch
    return (torch.arange(n, dtype=torch.float64) * (ratio / n) + (1.0 - ratio) / 2.0) * SPATIAL_SCALE


def _frame_grid(lat_h: int, lat_w: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A latent frame's [rows, 2] (h, w) rotary coordinates, area-normalised, and its width axis."""
    sqrt_area = math.sqrt(lat_h * lat_w)
    hs, ws = _spatial_axis(lat_h, PATCH[1], sqrt_area), _spatial_axis(lat_w, PATCH[2], sqrt_area)
    grid_h, grid_w = torch.meshgrid(hs, ws, indexing="ij")
    return torch.stack([grid_h.reshape(-1), grid_w.reshape(-1)], dim=-1), ws


def _video_times(latent_t: int, origin: float) -> torch.Tensor:
    spans = torch.tensor([FRAME_RESCALE * FRAME_PER_TOKEN[k % 5] for k in range(latent_t)], dtype=torch.float64)
    return origin + torch.cat([torch.zeros(1, dtype=torch.float64), spans[:-1].cumsum(0)])


def t2va_layout(
    text_len: int,
    latent_t: int,
    lat_h: int,
    lat_w: int,
    audio_t: int,
    text_tags: torch.Tensor | None = None,
    keyframe_frames: tuple[int, ...] = (),
    ref_grids: tuple[tuple[int, int], ...] = (),
) -> PackedLayout:
    """[text | keyframe rows | reference image rows | target audio | target video]: text rows at times 0..L-1;
    each reference image (its latent's own h x w grid) takes one time unit after the text, L + i, and the media
    clock starts after them, at M = L + the references; a keyframe's rows (one latent frame on the target's grid)
    at M + 5/3 x its pixel frame index; audio rows one time unit per latent (40 Hz) from M, pinned to the two ends
    of the width axis per stereo channel. The video indices list the keyframe and reference rows first, then the
    target's."""
    frame, ws = _frame_grid(lat_h, lat_w)
    per_frame = frame.shape[0]
    media_t = float(text_len + len(ref_grids))
    refs = [_frame_grid(h, w)[0] for h, w in ref_grids]
    n_refs = sum(r.shape[0] for r in refs)
    n_cond = len(keyframe_frames) * per_frame + n_refs
    n_audio, n_video = audio_t * AUDIO_CHANNELS, latent_t * per_frame

    text = torch.zeros(text_len, 3, dtype=torch.float64)
    text[:, 0] = torch.arange(text_len, dtype=torch.float64)
    cond = torch.empty(len(keyframe_frames), per_frame, 3, dtype=torch.float64)
    for k, index in enumerate(keyframe_frames):
        cond[k, :, 0] = media_t + FRAME_RESCALE * index
        cond[k, :, 1:] = frame
    ref_rows = [
        torch.cat([torch.full((r.shape[0], 1), float(text_len + i), dtype=torch.float64), r], 1)
        for i, r in enumerate(refs)
    ]
    audio = torch.zeros(n_audio, 3, dtype=torch.float64)
    audio[:, 0] = (media_t + torch.arange(audio_t, dtype=torch.float64)).repeat(AUDIO_CHANNELS)
    audio[:audio_t, 2], audio[audio_t:, 2] = float(ws[0]), float(ws[-1])
    video = torch.empty(latent_t, per_frame, 3, dtype=torch.float64)
    video[:, :, 0] = _video_times(latent_t, media_t)[:, None]
    video[:, :, 1:] = frame[None]

    if text_tags is None:
        text_tags = torch.full((text_len,), TEXT_TAG, dtype=torch.long)
    media = n_cond + n_audio + n_video
    text_tags = text_tags.to("cpu", torch.long).reshape(-1)
    if text_tags.shape[0] != text_len:
        raise ValueError(f"MiniMax H3: {text_tags.shape[0]} prompt row tags for {text_len} prompt rows")
    tags = torch.cat([text_tags, torch.full((media,), VIDEO_TAG, dtype=torch.long)])
    audio_start = text_len + n_cond
    tags[audio_start : audio_start + n_audio] = AUDIO_TAG
    return PackedLayout(
        torch.cat([text, cond.reshape(-1, 3), *ref_rows, audio, video.reshape(-1, 3)]),
        tags,
        torch.arange(text_len),
        torch.arange(audio_start, audio_start + n_audio),
        torch.cat(
            [torch.arange(text_len, audio_start), torch.arange(audio_start + n_audio, audio_start + n_audio + n_video)]
        ),
    )


@dataclass(frozen=True)
class Keyframe:
    """A keyframe's condition: its normalised latent [1, C, 1, H, W] (the target's size) and pixel frame index."""

    latent: torch.Tensor
    frame_index: int


def keyframe_rows(keyframes: list[Keyframe], aug: float = VISUAL_COND_AUG, seed: int = 0) -> torch.Tensor:
    """The keyframes' patchified rows, noised to t = aug (condition_rows)."""
    return condition_rows([kf.latent for kf in keyframes], aug, seed)


def condition_rows(latents: list[torch.Tensor], aug: float = VISUAL_COND_AUG, seed: int = 0) -> torch.Tensor:
    """The condition latents' (keyframes', then reference images') patchified rows, noised to t = aug as ComfyUI
    does: each condition restarts one CPU generator at `seed` and mixes aug x rows + (1 - aug) x noise."""
    rows = []
    for latent in latents:
        r = _patchify(latent.to(torch.float32))
        if aug < 1.0:
            noise = torch.randn(r.shape, generator=torch.Generator("cpu").manual_seed(seed), dtype=torch.float32)
            r = aug * r + (1.0 - aug) * noise.to(r.device)
        rows.append(r)
    return torch.cat(rows)


def _patchify(x: torch.Tensor) -> torch.Tensor:
    # [1, C, T, H, W] -> [T*(H/2)*(W/2), C*2*2], frame-major then row-major, channels outermost in a row
    _, c, t, h, w = x.shape
    x = x.reshape(c, t, h // 2, 2, w // 2, 2).permute(1, 2, 4, 0, 3, 5)
    return x.reshape(t * (h // 2) * (w // 2), c * 4)


def _unpatchify(rows: torch.Tensor, t: int, h: int, w: int, c: int) -> torch.Tensor:
    x = rows.reshape(t, h // 2, w // 2, c, 2, 2).permute(3, 0, 1, 4, 2, 5)
    return x.reshape(1, c, t, h, w)


def apply(
    model: MiniMaxH3Transformer3DModel,
    video: torch.Tensor,
    audio: torch.Tensor,
    context: torch.Tensor,
    sigma: float,
    text_tags: torch.Tensor | None = None,
    shifts: tuple[float, float] = (SIGMA_SHIFT_VIDEO, SIGMA_SHIFT_AUDIO),
    keyframes: list[Keyframe] = (),
    refs: list[torch.Tensor] = (),
    cond_aug: float = VISUAL_COND_AUG,
    seed: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One evaluation of the text-to-video task, of first/last-frame-to-video with keyframes, or of
    reference-to-video with reference image latents `refs` ([1, C, 1, h, w] each, any even h x w), as ComfyUI's
    MiniMaxH3Model computes it: the negated video and audio velocities, shaped as the latents."""
    if video.ndim != 5 or video.shape[0] != 1 or audio.ndim != 4 or audio.shape[2] != AUDIO_CHANNELS:
        raise ValueError(
            f"MiniMax H3 takes one [1, C, T, H, W] video latent and one [1, C, 2, T] audio latent, "
            f"got {tuple(video.shape)} and {tuple(audio.shape)}"
        )
    if video.shape[-1] % 2 or video.shape[-2] % 2:
        raise ValueError(f"MiniMax H3's latent height and width must be even, got {tuple(video.shape[-2:])}")
    _, c, latent_t, lat_h, lat_w = video.shape
    for kf in keyframes:
        if tuple(kf.latent.shape) != (1, c, 1, lat_h, lat_w):
            raise ValueError(
                f"a MiniMax H3 keyframe latent must be one frame of the video's size "
                f"{(1, c, 1, lat_h, lat_w)}, got {tuple(kf.latent.shape)}"
            )
    for ref in refs:
        if ref.ndim != 5 or ref.shape[:3] != (1, c, 1) or ref.shape[-1] % 2 or ref.shape[-2] % 2:
            raise ValueError(
                f"a MiniMax H3 reference image latent must be one frame [1, {c}, 1, h, w] with even h and w, "
                f"got {tuple(ref.shape)}"
            )
    audio_t = audio.shape[-1]
    layout = t2va_layout(
        context.shape[1],
        latent_t,
        lat_h,
        lat_w,
        audio_t,
        text_tags,
        tuple(kf.frame_index for kf in keyframes),
        tuple((r.shape[-2], r.shape[-1]) for r in refs),
    )
    sigma = max(float(sigma), 1e-6)
    t_video = 1.0 - sigma
    t_audio = 1.0 - time_shift_sigma(sigma, *shifts)
    n_cond = layout.video_indices.shape[0] - latent_t * (lat_h // 2) * (lat_w // 2)
    row_t = torch.full((layout.token_tags.shape[0],), t_video, dtype=torch.float32)
    row_t[layout.audio_indices] = t_audio
    row_t[layout.video_indices[:n_cond]] = max(t_video, cond_aug)
    timesteps, timestep_indices = torch.unique(row_t, sorted=True, return_inverse=True)
    video_rows = _patchify(video.to(torch.float32))
    conds = [kf.latent for kf in keyframes] + list(refs)
    if conds:
        video_rows = torch.cat([condition_rows(conds, cond_aug, seed), video_rows])
    audio_rows = audio[0].to(torch.float32).permute(1, 2, 0).reshape(AUDIO_CHANNELS * audio_t, -1)
    with torch.no_grad():
        v, a = model(
            hidden_states=video_rows[None],
            audio_hidden_states=audio_rows[None],
            encoder_hidden_states=context.to(torch.float32),
            timestep=timesteps,
            timestep_indices=timestep_indices,
            token_tags=layout.token_tags,
            position_ids=layout.position_ids.to(torch.float32),
            video_indices=layout.video_indices,
            audio_indices=layout.audio_indices,
            text_indices=layout.text_indices,
            return_dict=False,
        )
    video_out = _unpatchify(v[0, n_cond:], latent_t, lat_h, lat_w, c)
    audio_out = a[0].reshape(AUDIO_CHANNELS, audio_t, -1).permute(2, 0, 1)[None]
    return -video_out.to(video.dtype), -audio_out.to(audio.dtype)
