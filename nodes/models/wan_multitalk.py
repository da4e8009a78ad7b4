"""MeiGen's MultiTalk / InfiniteTalk audio patch for Wan 2.1 image-to-video (ComfyUI's model_patches
wan2.1_infiniteTalk_{single,multi}_fp16: `audio_proj.*` and `blocks.N.{norm_x, audio_cross_attn.*}`), read for
facts from ComfyUI's comfy/ldm/wan/model_multitalk.py and comfy_extras/nodes_model_patch.py (upstream 0.10.0).

- The audio projection turns wav2vec 2.0 windows into audio tokens per latent frame: the first latent frame
  reads a 5-frame window around video frame 0 (proj1), every later latent frame the windows of its 4 video frames
  cut to 8 rows (proj1_vf); both ReLU, then proj2 (ReLU), proj3 to `tokens` x `width`, a LayerNorm.
- In every Wan block, after the text cross-attention, the block's tokens (LayerNorm `norm_x`) attend to the
  audio tokens of their own latent frame, and the result times `audio_scale` is added.
- With two speakers (two audio streams and a mask each), each block's self-attention queries against the first
  frame's keys give per-token speaker maps; a 1-D rotary turn puts every token's query near its speaker's audio
  tokens (speaker 1 at 0..4, speaker 2 at 20..24, the keys at their speaker's centre).

Sizes come from the tensors (ComfyUI fixes 40 blocks, 40 heads and wav2vec2-base's 12 x 768 features: its
released files' sizes); here the heads are the block width over Wan's 128, the same 40 for the released file, so
tiny files in the real layout load. Our own code."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import nn
from torch.nn import functional as F

MARKER = "audio_proj.proj1.weight"
WINDOW = 5  # audio frames around each video frame
VAE_STRIDE = 4  # video frames per later latent frame
HEAD_DIM = 128  # Wan's; 5120 / 128 = the released file's 40 heads
ROPE_BASE = 10000.0
# the rotary positions of the two speakers' tokens and of their audio tokens (ComfyUI's class_range 24, interval 4)
SPEAKER_RANGES = ((0.0, 4.0), (20.0, 24.0))
MAP_HEAD_SPLITS = 2  # the speaker maps average over two halves of the heads


class AudioProjection(nn.Module):
    def __init__(self, first_in: int, latter_in: int, hidden: int, tokens: int, width: int) -> None:
        super().__init__()
        self.tokens, self.width = tokens, width
        self.proj1 = nn.Linear(first_in, hidden)
        self.proj1_vf = nn.Linear(latter_in, hidden)
        self.proj2 = nn.Linear(hidden, hidden)
        self.proj3 = nn.Linear(hidden, tokens * width)
        self.norm = nn.LayerNorm(width)

    def forward(self, first: torch.Tensor, latter: torch.Tensor) -> torch.Tensor:
        """first [P,1,5,L,C], latter [P,n,8,L,C] -> [P, 1 + n, tokens, width]."""
        p = first.shape[0]
        a = torch.relu(self.proj1(first.reshape(p * first.shape[1], -1))).reshape(p, first.shape[1], -1)
        b = torch.relu(self.proj1_vf(latter.reshape(p * latter.shape[1], -1))).reshape(p, latter.shape[1], -1)
        h = torch.cat([a, b], dim=1)
        frames = h.shape[1]
        h = torch.relu(self.proj2(h.reshape(p * frames, -1)))
        tokens = self.norm(self.proj3(h).reshape(p * frames, self.tokens, self.width))
        return tokens.reshape(p, frames, self.tokens, self.width)


class AudioCrossAttention(nn.Module):
    def __init__(self, dim: int, audio_width: int, heads: int) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.q_linear = nn.Linear(dim, dim)
        self.kv_linear = nn.Linear(audio_width, 2 * dim)
        self.proj = nn.Linear(dim, dim)


class AudioBlock(nn.Module):
    def __init__(self, dim: int, audio_width: int, heads: int) -> None:
        super().__init__()
        self.norm_x = nn.LayerNorm(dim)
        self.audio_cross_attn = AudioCrossAttention(dim, audio_width, heads)


class MultiTalkPatch(nn.Module):
    def __init__(self, sizes: Mapping[str, int]) -> None:
        super().__init__()
        s = dict(sizes)
        self.audio_proj = AudioProjection(s["first_in"], s["latter_in"], s["hidden"], s["tokens"], s["width"])
        self.blocks = nn.ModuleList(AudioBlock(s["dim"], s["width"], s["heads"]) for _ in range(s["blocks"]))


def sizes_of(shapes: Mapping[str, Sequence[int]]) -> dict[str, int]:
    """The patch's sizes from its tensors' shapes."""
    dim = int(shapes["blocks.0.audio_cross_attn.proj.weight"][0])
    width = int(shapes["audio_proj.norm.weight"][0])
    hidden, first_in = (int(v) for v in shapes["audio_proj.proj1.weight"])
    tokens = int(shapes["audio_proj.proj3.weight"][0]) // width
    blocks = 1 + max(int(k.split(".")[1]) for k in shapes if k.startswith("blocks."))
    if dim % HEAD_DIM or first_in % WINDOW:
        raise ValueError(f"not a MultiTalk patch ComfyUI's layout knows (width {dim}, audio input {first_in})")
    latter_in = int(shapes["audio_proj.proj1_vf.weight"][1])
    if latter_in != first_in // WINDOW * (WINDOW + VAE_STRIDE - 1):
        raise ValueError("proj1_vf's input is not 8 windows of proj1's audio features")
    return {
        "dim": dim,
        "width": width,
        "hidden": hidden,
        "first_in": first_in,
        "latter_in": latter_in,
        "tokens": tokens,
        "blocks": blocks,
        "heads": dim // HEAD_DIM,
        "features": first_in // WINDOW,  # wav2vec layers x width per audio frame
    }


def build(sd: Mapping[str, torch.Tensor], path: str | None) -> nn.Module:
    from .errors import ModelLoadError
    from .safetensors_io import build_module

    try:
        sizes = sizes_of({k: tuple(v.shape) for k, v in sd.items()})
    except (KeyError, ValueError) as e:
        raise ModelLoadError(path, f"not a usable MultiTalk patch: {e}") from None
    return build_module(lambda: MultiTalkPatch(sizes), dict(sd), path, "MultiTalk audio patch")


# --- audio features -> windows (node side) ---


def audio_windows(encoded: Sequence[torch.Tensor], start: int, end: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per speaker ([T, layers, width] at 25 frames a second), the audio windows of video frames start..end-1:
    (first [P,1,5,L,C], later [P,(n-1)/4,8,L,C]). Frames past the audio repeat its first frame (likely silence);
    window rows past either end are clamped to it."""
    offsets = torch.arange(WINDOW) - WINDOW // 2
    rows = []
    for feats in encoded:
        if end > feats.shape[0]:
            feats = torch.cat([feats, feats[:1].expand(end - feats.shape[0], *feats.shape[1:])])
        idx = (torch.arange(start, end).unsqueeze(1) + offsets).clamp(0, feats.shape[0] - 1)
        rows.append(feats[idx])
    emb = torch.stack(rows)  # [P, frames, 5, L, C]
    if (emb.shape[1] - 1) % VAE_STRIDE:
        raise ValueError(f"length: {emb.shape[1]} frames is not 1 + a multiple of {VAE_STRIDE}")
    mid = WINDOW // 2
    later = emb[:, 1:].reshape(emb.shape[0], -1, VAE_STRIDE, *emb.shape[2:])
    # a later latent frame's 4 video frames: the first one's window up to its centre, the middle ones' centres,
    # the last one's from its centre on (3 + 2 + 3 rows)
    parts = [later[:, :, 0, : mid + 1], later[:, :, 1:-1, mid], later[:, :, -1, mid:]]
    return emb[:, :1], torch.cat(parts, dim=2)


def audio_tokens(patch: MultiTalkPatch, first: torch.Tensor, later: torch.Tensor) -> torch.Tensor:
    """[frames, P * tokens, width]: each latent frame's audio tokens, speaker after speaker."""
    p = patch.audio_proj
    w = p.proj1.weight
    out = p(first.to(w.device, w.dtype), later.to(w.device, w.dtype))  # [P, f, tokens, width]
    return torch.cat(out.unbind(0), dim=1)


# --- inside the Wan blocks (step side) ---


def _rope_1d(x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """A 1-D rotary turn on interleaved pairs of the last axis; pos [N] for x [..., N, D]; in float32."""
    d = x.shape[-1]
    freqs = 1.0 / (ROPE_BASE ** (torch.arange(0, d, 2)[: d // 2].float() / d))
    angles = (pos.float().to(x.device)[:, None] * freqs.to(x.device)).repeat_interleave(2, dim=-1)
    xf = x.float()
    pairs = xf.unflatten(-1, (-1, 2))
    turned = torch.stack([-pairs[..., 1], pairs[..., 0]], dim=-1).flatten(-2)
    return (xf * angles.cos() + turned * angles.sin()).type_as(x)


def speaker_maps(q: torch.Tensor, k: torch.Tensor, first_frame_tokens: int, masks: torch.Tensor) -> torch.Tensor:
    """q, k [1, L, H, D] (the self-attention's, turned), masks [P, first_frame_tokens] -> [P, L]: per speaker, the
    head-averaged softmax attention of every token to the first frame's tokens, summed over the speaker's mask and
    divided by its size; heads averaged in two halves (an odd last head left out, as ComfyUI's)."""
    heads = q.shape[2]
    chunk = heads // MAP_HEAD_SPLITS
    if chunk == 0:
        raise ValueError("two speakers need a Wan model with at least two attention heads")
    scale = q.shape[-1] ** -0.5
    k = k[:, :first_frame_tokens]
    total = torch.zeros(masks.shape[0], q.shape[1], dtype=q.dtype, device=q.device)
    for i in range(MAP_HEAD_SPLITS):
        qh = q[:, :, i * chunk : (i + 1) * chunk].transpose(1, 2) * scale  # [1, h, L, D]
        kh = k[:, :, i * chunk : (i + 1) * chunk].permute(0, 2, 3, 1)  # [1, h, D, S]
        attn = qh @ kh
        attn = (attn - attn.max(dim=-1, keepdim=True).values).exp()
        attn = attn / (attn.sum(dim=-1, keepdim=True) + 1e-8)
        maps = []
        for m in masks:
            m = m.to(attn.dtype).view(1, 1, 1, -1)
            maps.append(((attn * m).sum(-1) / (m.sum() + 1e-8)).mean(dim=1))
        total = total + torch.cat(maps, dim=0)
    return total / MAP_HEAD_SPLITS


def _speaker_positions(maps: torch.Tensor) -> torch.Tensor:
    """[2, L] maps -> [L] rotary positions: each token at its dominant speaker's range, placed by its map value
    between that speaker's minimum and maximum."""
    out = []
    for m, (lo, hi) in zip(maps, SPEAKER_RANGES):
        mn, mx = m.min(), m.max()
        out.append((m - mn) / (mx - mn + 1e-8) * (hi - lo) + lo)
    dominant = maps.argmax(dim=0)
    return torch.stack(out, dim=1)[torch.arange(maps.shape[1]), dominant]


def audio_attention(
    attn: AudioCrossAttention, x: torch.Tensor, audio: torch.Tensor, grid: Sequence[int], maps: torch.Tensor | None
) -> torch.Tensor:
    """One sample's tokens x [1, N_t * S, dim] attend per latent frame to that frame's audio tokens audio
    [N_t, A, width]; with speaker maps [2, L], both sides are turned by speaker."""
    n_t, n_h, n_w = grid
    s = n_h * n_w
    h, d = attn.heads, attn.head_dim
    xf = x.reshape(n_t, s, -1)
    q = attn.q_linear(xf).view(n_t, s, h, d).transpose(1, 2)  # [N_t, H, S, D]
    k, v = attn.kv_linear(audio).view(n_t, audio.shape[1], 2, h, d).unbind(2)
    k, v = k.transpose(1, 2), v.transpose(1, 2)
    if maps is not None and maps.shape[0] > 1:
        pos = _speaker_positions(maps)
        q = _rope_1d(q.transpose(0, 1).reshape(1, h, n_t * s, d), pos).reshape(h, n_t, s, d).transpose(0, 1)
        a = audio.shape[1]
        per_frame = torch.full((a,), sum(SPEAKER_RANGES[1]) / 2, dtype=k.dtype)
        per_frame[: a // 2] = sum(SPEAKER_RANGES[0]) / 2
        k = _rope_1d(k.transpose(0, 1).reshape(1, h, n_t * a, d), per_frame.repeat(n_t))
        k = k.reshape(h, n_t, a, d).transpose(0, 1)
    out = F.scaled_dot_product_attention(q, k, v)
    return attn.proj(out.transpose(1, 2).reshape(n_t, s, h * d)).reshape(1, n_t * s, -1)
