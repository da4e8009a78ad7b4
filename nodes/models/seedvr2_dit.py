"""SeedVR2's diffusion transformer (ByteDance's NaDiT, as today's ComfyUI builds it in comfy/ldm/seedvr/model.py):
a one-step video restorer on the causal VAE's 16-channel latents (nodes/models/seedvr2_vae.py).

Per call: the noisy latent and SeedVR2Conditioning's `condition` (the clean latent plus a ones channel, 17) are
joined to 33 channels, cut into 1x2x2 patches (vid_in), and run with the text tokens (txt_in of the 5120-wide
embeddings stored in the file) through the blocks; vid_out folds the patches back to 16 channels.

Each block: RMS norm, AdaSingle modulation (the timestep embedding's shift/scale/gate plus the block's own learned
ones), windowed joint attention, gated residual, then the same around an MLP. SeedVR2Attention runs in 3-D windows of the
patch grid, every window attending to itself plus the whole text; the window grid follows ByteDance's 720p rule
(4x3x3 windows for a 45x80 grid, scaled to the input's area), every second block shifted by half a window. The text
tokens' attention outputs are averaged over the windows.

The released variants, told apart as ComfyUI tells them (comfy/model_detection.py: which block index exists):
- 3B (32 blocks, 2560 wide, 20 heads): the first 10 blocks keep separate video/text weights (`vid`/`txt`), the
  rest share them (`all`); SwiGLU MLPs; rotary positions on video and text ("lang" frequencies: text token j at
  (j, j, j), a video token at (text length + t, h, w) inside its window); the last block leaves the text alone; an
  output RMS norm with its own AdaSingle.
- 7B (36 blocks, 3072 wide, 24 heads): shared weights after block 10 with SwiGLU, or separate weights in every
  block with GELU MLPs; rotary positions on video only ("pixel" frequencies over -1..1 across each window).
Widths, heads and head size come from the file's tensors, so the tiny demo files run the same code.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

LATENT_CHANNELS = 16
TEXT_WIDTH = 5120
PATCH = (1, 2, 2)
NORM_EPS = 1e-5
SHARED_AFTER_7B_SWIGLU = 10  # ComfyUI's mm_layers for the 3B and the shared 7B; the separate 7B has 36
SINUSOIDAL_DIM = 256
WINDOWS = (4, 3, 3)  # windows per (time, height, width) at the 720p reference area
REFERENCE_AREA = 45 * 80  # ByteDance's dit_v2/window.py, in patches
MAX_WINDOW_FRAMES = 30
PIXEL_MAX_FREQ = 256
LANG_THETA = 10000.0
BLOCKS_3B, BLOCKS_7B = 32, 36


@dataclass(frozen=True)
class SeedVR2DiTSpec:
    width: int
    heads: int
    head_dim: int
    blocks: int
    in_channels: int
    text_width: int
    separate: tuple[bool, ...]  # per block: own video and text weights (else shared `all`)
    swiglu: bool
    qkv_bias: bool
    rope_pairs: int  # rotary frequencies per axis
    output_norm: bool

    @property
    def is_7b(self) -> bool:
        return self.blocks == BLOCKS_7B

    @property
    def last_block_video_only(self) -> bool:
        return not self.is_7b


def _branch_key(sd: Mapping[str, torch.Tensor], block: int, path: str) -> str:
    for branch in ("vid", "all"):
        key = f"blocks.{block}.{path}.{branch}.weight"
        if key in sd:
            return key
    raise KeyError(f"blocks.{block}.{path}")


def spec_from_state_dict(sd: Mapping[str, torch.Tensor]) -> SeedVR2DiTSpec:
    """The transformer's sizes, read from a state dict in the published layout (no prefix)."""
    blocks = 0
    while any(k.startswith(f"blocks.{blocks}.") for k in sd):
        blocks += 1
    if blocks not in (BLOCKS_3B, BLOCKS_7B):
        raise ValueError(f"a SeedVR2 transformer has 32 (3B) or 36 (7B) blocks, this file has {blocks}")
    width, patch_in = sd["vid_in.proj.weight"].shape
    head_dim = sd[_branch_key(sd, 0, "attn.norm_q")].shape[0]
    qkv = sd[_branch_key(sd, 0, "attn.proj_qkv")].shape[0]
    freqs = sd.get("blocks.0.attn.rope.rope.freqs")
    default_pairs = (128 // 3) // 2 if blocks == BLOCKS_3B else (64 // 3) // 2  # ComfyUI's rope_dim 128 / 64
    return SeedVR2DiTSpec(
        width=int(width),
        heads=int(qkv // (3 * head_dim)),
        head_dim=int(head_dim),
        blocks=blocks,
        in_channels=int(patch_in) // (PATCH[0] * PATCH[1] * PATCH[2]),
        text_width=int(sd["txt_in.weight"].shape[1]) if "txt_in.weight" in sd else int(width),
        separate=tuple(f"blocks.{i}.attn.proj_qkv.vid.weight" in sd for i in range(blocks)),
        swiglu=any(k.startswith("blocks.0.mlp.") and ".proj_in_gate." in k for k in sd),
        qkv_bias=any(k.startswith("blocks.0.attn.proj_qkv.") and k.endswith(".bias") for k in sd),
        rope_pairs=int(freqs.shape[0]) if freqs is not None else default_pairs,
        output_norm="vid_out_norm.weight" in sd,
    )


class SeedVR2Streams(nn.Module):
    """One layer per stream (`vid`, `txt`) or one shared by both (`all`); `txt` may be absent (video only)."""

    def __init__(self, make, separate: bool, text: bool = True) -> None:
        super().__init__()
        if separate:
            self.vid = make()
            if text:
                self.txt = make()
        else:
            self.all = make()
        self.separate = separate
        self.text = text

    def video(self) -> nn.Module:
        return self.vid if self.separate else self.all

    def textual(self) -> nn.Module:
        return self.txt if self.separate else self.all


class SeedVR2RopeFreqs(nn.Module):
    """Holds the file's `rope.freqs` buffer under ComfyUI's name (attn.rope.rope.freqs)."""

    def __init__(self, pairs: int, pixel: bool) -> None:
        super().__init__()
        self.rope = nn.Module()
        self.rope.register_buffer("freqs", default_frequencies(pairs, pixel))


def default_frequencies(pairs: int, pixel: bool) -> torch.Tensor:
    if pixel:  # ByteDance's dit_v2/rope.py: evenly spaced up to max_freq / 2, times pi
        return torch.linspace(1.0, PIXEL_MAX_FREQ / 2, pairs) * math.pi
    dim = 2 * pairs  # rotary-embedding-torch's "lang": theta ** (-2i / dim)
    return 1.0 / (LANG_THETA ** (torch.arange(0, dim, 2)[:pairs].float() / dim))


class SeedVR2AdaSingle(nn.Module):
    """Learned shift/scale/gate added to the timestep embedding's slice for this block and layer."""

    def __init__(self, width: int, layers: tuple[str, ...], gate: bool = True) -> None:
        super().__init__()
        self.layers = layers
        for layer in layers:
            setattr(self, f"{layer}_shift", nn.Parameter(torch.zeros(width)))
            setattr(self, f"{layer}_scale", nn.Parameter(torch.ones(width)))
            if gate:
                setattr(self, f"{layer}_gate", nn.Parameter(torch.zeros(width)))

    def parts(self, emb: torch.Tensor, layer: str) -> torch.Tensor:
        """[B, width, 3] (shift, scale, gate) of the embedding [B, 6 * width]."""
        return emb.reshape(emb.shape[0], -1, len(self.layers), 3)[:, :, self.layers.index(layer)]

    def modulate(self, x: torch.Tensor, per_token: torch.Tensor, layer: str) -> torch.Tensor:
        shift, scale = per_token[..., 0], per_token[..., 1]
        return x * (scale + getattr(self, f"{layer}_scale")) + (shift + getattr(self, f"{layer}_shift"))

    def gate(self, x: torch.Tensor, per_token: torch.Tensor, layer: str) -> torch.Tensor:
        return x * (per_token[..., 2] + getattr(self, f"{layer}_gate"))


class SeedVR2SwiGLU(nn.Module):
    def __init__(self, width: int, hidden: int) -> None:
        super().__init__()
        self.proj_in_gate = nn.Linear(width, hidden, bias=False)
        self.proj_in = nn.Linear(width, hidden, bias=False)
        self.proj_out = nn.Linear(hidden, width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj_out(F.silu(self.proj_in_gate(x)) * self.proj_in(x))


class SeedVR2GeluMLP(nn.Module):
    def __init__(self, width: int, hidden: int) -> None:
        super().__init__()
        self.proj_in = nn.Linear(width, hidden)
        self.proj_out = nn.Linear(hidden, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj_out(F.gelu(self.proj_in(x), approximate="tanh"))


class SeedVR2Attention(nn.Module):
    def __init__(self, spec: SeedVR2DiTSpec, separate: bool) -> None:
        super().__init__()
        inner = spec.heads * spec.head_dim
        self.proj_qkv = SeedVR2Streams(lambda: nn.Linear(spec.width, 3 * inner, bias=spec.qkv_bias), separate)
        self.proj_out = SeedVR2Streams(lambda: nn.Linear(inner, spec.width), separate)
        self.norm_q = SeedVR2Streams(lambda: nn.RMSNorm(spec.head_dim, eps=NORM_EPS), separate)
        self.norm_k = SeedVR2Streams(lambda: nn.RMSNorm(spec.head_dim, eps=NORM_EPS), separate)
        self.rope = SeedVR2RopeFreqs(spec.rope_pairs, pixel=spec.is_7b)


class SeedVR2Block(nn.Module):
    def __init__(self, spec: SeedVR2DiTSpec, index: int) -> None:
        super().__init__()
        separate = spec.separate[index]
        text = not (spec.last_block_video_only and index == spec.blocks - 1)
        self.attn = SeedVR2Attention(spec, separate)
        if spec.swiglu:  # ComfyUI's hidden size: 2/3 of 4x, rounded up to 256
            hidden = 256 * ((int(2 * spec.width * 4 / 3) + 255) // 256)
            self.mlp = SeedVR2Streams(lambda: SeedVR2SwiGLU(spec.width, hidden), separate, text)
        else:
            self.mlp = SeedVR2Streams(lambda: SeedVR2GeluMLP(spec.width, 4 * spec.width), separate, text)
        self.ada = SeedVR2Streams(lambda: SeedVR2AdaSingle(spec.width, ("attn", "mlp")), separate, text)
        self.text = text


def window_slices(size: tuple[int, int, int], shifted: bool) -> list[tuple[slice, slice, slice]]:
    """ByteDance's 720p window grid for a (t, h, w) patch grid, in ComfyUI's order (width outermost, time
    innermost); shifted grids start half a window early on every axis the window does not already cover."""
    t, h, w = size
    scale = math.sqrt(REFERENCE_AREA / (h * w))
    window = (
        math.ceil(min(t, MAX_WINDOW_FRAMES) / WINDOWS[0]),
        math.ceil(round(h * scale) / WINDOWS[1]),
        math.ceil(round(w * scale) / WINDOWS[2]),
    )

    def axis(n: int, s: int) -> list[slice]:
        if shifted and s < n:
            count = math.ceil((n - 0.5) / s) + 1
            spans = [(max(int((k - 0.5) * s), 0), min(int((k + 0.5) * s), n)) for k in range(count)]
        else:
            count = math.ceil(n / s) if not shifted else 1
            spans = [(k * s, min((k + 1) * s, n)) for k in range(count)]
        return [slice(a, b) for a, b in spans if b > a]

    ts, hs, ws = axis(t, window[0]), axis(h, window[1]), axis(w, window[2])
    return [(st, sh, sw) for sw in ws for sh in hs for st in ts]


def rotate_pairs(x: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    """Rotate the leading 2 * angles.shape[-1] features of x [..., L, d] pairwise (2i, 2i+1) by angles [L, n]."""
    n = angles.shape[-1]
    head, rest = x[..., : 2 * n], x[..., 2 * n :]
    pairs = head.float().reshape(*head.shape[:-1], n, 2)
    cos, sin = angles.cos(), angles.sin()
    a, b = pairs[..., 0], pairs[..., 1]
    turned = torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)
    return torch.cat((turned.to(x.dtype), rest), dim=-1)


def axial_angles(freqs: torch.Tensor, positions: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """[L, 3n] angles of every (t, h, w) grid point: each axis' positions times the frequencies, concatenated."""
    t, h, w = (p.float()[:, None] * freqs for p in positions)
    nt, nh, nw = t.shape[0], h.shape[0], w.shape[0]
    grid = torch.cat(
        (
            t[:, None, None].expand(nt, nh, nw, -1),
            h[None, :, None].expand(nt, nh, nw, -1),
            w[None, None, :].expand(nt, nh, nw, -1),
        ),
        dim=-1,
    )
    return grid.reshape(nt * nh * nw, -1)


class SeedVR2TimeEmbedding(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.proj_in = nn.Linear(SINUSOIDAL_DIM, width)
        self.proj_hid = nn.Linear(width, width)
        self.proj_out = nn.Linear(width, 6 * width)

    def forward(self, timestep: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        half = SINUSOIDAL_DIM // 2
        freqs = torch.exp(torch.arange(half, dtype=torch.float32) * (-math.log(10000.0) / half))
        args = timestep.float().reshape(-1)[:, None] * freqs[None]
        emb = torch.cat((args.sin(), args.cos()), dim=-1).to(dtype)  # sin first, as ByteDance's embedding
        emb = F.silu(self.proj_in(emb))
        emb = F.silu(self.proj_hid(emb))
        return self.proj_out(emb)


class SeedVR2Patch(nn.Module):
    def __init__(self, features_in: int, features_out: int) -> None:
        super().__init__()
        self.proj = nn.Linear(features_in, features_out)


class SeedVR2DiT(nn.Module):
    """The NaDiT in the published key layout; forward(x, timestep, context, condition) -> [B,16,T,H,W]."""

    def __init__(self, spec: SeedVR2DiTSpec) -> None:
        super().__init__()
        self.spec = spec
        patch = PATCH[0] * PATCH[1] * PATCH[2]
        self.register_buffer("positive_conditioning", torch.zeros(58, TEXT_WIDTH))
        self.register_buffer("negative_conditioning", torch.zeros(64, TEXT_WIDTH))
        self.vid_in = SeedVR2Patch(spec.in_channels * patch, spec.width)
        self.txt_in = nn.Linear(spec.text_width, spec.width)
        self.emb_in = SeedVR2TimeEmbedding(spec.width)
        self.blocks = nn.ModuleList(SeedVR2Block(spec, i) for i in range(spec.blocks))
        self.vid_out = SeedVR2Patch(spec.width, LATENT_CHANNELS * patch)
        if spec.output_norm:
            self.vid_out_norm = nn.RMSNorm(spec.width, eps=NORM_EPS)
            self.vid_out_ada = SeedVR2AdaSingle(spec.width, ("out",), gate=False)

    # -- positions -----------------------------------------------------------------------------------------------

    def _window_angles(self, block: SeedVR2Block, window: tuple[int, int, int], text_len: int) -> torch.Tensor:
        freqs = block.attn.rope.rope.freqs.float()
        f, h, w = window
        if self.spec.is_7b:  # positions spread over -1..1 across the window; frequencies recomputed from their count
            freqs = default_frequencies(freqs.numel(), pixel=True)
            spans = (torch.linspace(-1, 1, f), torch.linspace(-1, 1, h), torch.linspace(-1, 1, w))
        else:  # video after the text: time starts at the text's length
            spans = (torch.arange(text_len, text_len + f), torch.arange(h), torch.arange(w))
        return axial_angles(freqs, spans)

    def _text_angles(self, block: SeedVR2Block, text_len: int) -> torch.Tensor:
        freqs = block.attn.rope.rope.freqs.float()
        j = torch.arange(text_len).float()[:, None] * freqs
        return torch.cat((j, j, j), dim=-1)

    # -- the block -----------------------------------------------------------------------------------------------

    def _attention(self, block: SeedVR2Block, index: int, vid: list[torch.Tensor], txt: list[torch.Tensor]):
        """vid: per item [T, H, W, width]; txt: per item [L, width]. Returns the attention outputs, same shapes."""
        attn = block.attn
        heads, hd = self.spec.heads, self.spec.head_dim
        vid_out, txt_out = [], []
        for v, t in zip(vid, txt):
            grid = tuple(v.shape[:3])
            qkv = attn.proj_qkv.video()(v).reshape(*grid, 3, heads, hd)
            tq, tk, tv = attn.proj_qkv.textual()(t).reshape(t.shape[0], 3, heads, hd).unbind(1)
            q, k, vv = qkv.unbind(3)
            q, k = attn.norm_q.video()(q), attn.norm_k.video()(k)
            tq, tk = attn.norm_q.textual()(tq), attn.norm_k.textual()(tk)
            tq, tk, tv = (z.transpose(0, 1) for z in (tq, tk, tv))  # [heads, L, hd]
            if not self.spec.is_7b:
                text_angles = self._text_angles(block, t.shape[0])
                tq, tk = rotate_pairs(tq, text_angles), rotate_pairs(tk, text_angles)
            out = torch.empty(*grid, heads, hd, dtype=v.dtype)
            text_sum = torch.zeros_like(tq)
            windows = window_slices(grid, shifted=index % 2 == 1)
            for sl in windows:
                shape = tuple(s.stop - s.start for s in sl)
                wq, wk, wv = (z[sl].reshape(-1, heads, hd).transpose(0, 1) for z in (q, k, vv))
                angles = self._window_angles(block, shape, t.shape[0])
                wq, wk = rotate_pairs(wq, angles), rotate_pairs(wk, angles)
                n = wq.shape[1]
                joint = F.scaled_dot_product_attention(
                    torch.cat((wq, tq), 1)[None], torch.cat((wk, tk), 1)[None], torch.cat((wv, tv), 1)[None]
                )[0]
                out[sl] = joint[:, :n].transpose(0, 1).reshape(*shape, heads, hd)
                text_sum = text_sum + joint[:, n:]
            vid_out.append(attn.proj_out.video()(out.flatten(-2)))
            txt_out.append(attn.proj_out.textual()((text_sum / len(windows)).transpose(0, 1).flatten(-2)))
        return vid_out, txt_out

    def _block(self, block: SeedVR2Block, index: int, vid, txt, emb: torch.Tensor):
        def norm(x):
            return F.rms_norm(x, (x.shape[-1],), eps=NORM_EPS)

        vid_ada = block.ada.video()
        vmod = vid_ada.parts(emb, "attn")
        vmlp = vid_ada.parts(emb, "mlp")
        v_in = [vid_ada.modulate(norm(v), vmod[b], "attn") for b, v in enumerate(vid)]
        if block.text:
            txt_ada = block.ada.textual()
            tmod, tmlp = txt_ada.parts(emb, "attn"), txt_ada.parts(emb, "mlp")
            t_in = [txt_ada.modulate(norm(t), tmod[b], "attn") for b, t in enumerate(txt)]
        else:  # ComfyUI's last 3B block: its text is normed but not modulated, and its result is dropped
            t_in = [norm(t) for t in txt]
        v_att, t_att = self._attention(block, index, v_in, t_in)
        vid = [v + vid_ada.gate(a, vmod[b], "attn") for b, (v, a) in enumerate(zip(vid, v_att))]
        mlp_v = block.mlp.video()
        vid = [
            v + vid_ada.gate(mlp_v(vid_ada.modulate(norm(v), vmlp[b], "mlp")), vmlp[b], "mlp")
            for b, v in enumerate(vid)
        ]
        if not block.text:
            return vid, txt
        txt = [t + txt_ada.gate(a, tmod[b], "attn") for b, (t, a) in enumerate(zip(txt, t_att))]
        mlp_t = block.mlp.textual()
        txt = [
            t + txt_ada.gate(mlp_t(txt_ada.modulate(norm(t), tmlp[b], "mlp")), tmlp[b], "mlp")
            for b, t in enumerate(txt)
        ]
        return vid, txt

    # -- the whole -----------------------------------------------------------------------------------------------

    def forward(
        self, x: torch.Tensor, timestep: torch.Tensor, context: list[torch.Tensor], condition: torch.Tensor
    ) -> torch.Tensor:
        """x [B,16,T,H,W] (H, W even), timestep [B] (the model's 0..1000 scale), context: per item its text
        embeddings [L, 5120], condition [B,17,T,H,W]."""
        if x.ndim != 5 or x.shape[1] != LATENT_CHANNELS:
            raise ValueError(f"SeedVR2 takes [B, 16, T, H, W] latents, got {tuple(x.shape)}")
        if condition is None:
            raise ValueError("SeedVR2 needs SeedVR2Conditioning's condition (its latent and mask)")
        if condition.shape[0] != x.shape[0] or condition.shape[2:] != x.shape[2:]:
            raise ValueError(f"SeedVR2's condition {tuple(condition.shape)} does not match the latent {tuple(x.shape)}")
        if x.shape[-1] % 2 or x.shape[-2] % 2:
            raise ValueError(f"SeedVR2 takes latents of even height and width, got {tuple(x.shape[-2:])}")
        dtype = self.vid_in.proj.weight.dtype
        joined = torch.cat((x, condition), dim=1).to(dtype).movedim(1, -1)  # [B, T, H, W, 33]
        b, t, h, w, c = joined.shape
        patches = joined.reshape(b, t, h // 2, 2, w // 2, 2, c).permute(0, 1, 2, 4, 3, 5, 6)
        vid = list(self.vid_in.proj(patches.reshape(b, t, h // 2, w // 2, 4 * c)).unbind(0))
        txt = [self.txt_in(ctx.to(dtype)) for ctx in context]
        emb = self.emb_in(timestep.reshape(-1).expand(b) if timestep.numel() == 1 else timestep, dtype)
        for index, block in enumerate(self.blocks):
            vid, txt = self._block(block, index, vid, txt, emb)
        if self.spec.output_norm:
            # The output's timestep shift and scale are the blocks' attention ones: ByteDance's code (and ComfyUI's)
            # looks the per-token embedding up in a cache keyed by slot and stream, and the output head's slot 0
            # meets the blocks' attention entry. Its own learned out_shift / out_scale are added as usual.
            parts = self.blocks[0].ada.video().parts(emb, "attn")
            vid = [self.vid_out_ada.modulate(self.vid_out_norm(v), parts[i], "out") for i, v in enumerate(vid)]
        out = self.vid_out.proj(torch.stack(vid))  # [B, T, H/2, W/2, 4 * 16]
        out = out.reshape(b, t, h // 2, w // 2, 2, 2, LATENT_CHANNELS).permute(0, 6, 1, 2, 4, 3, 5)
        return out.reshape(b, LATENT_CHANNELS, t, h, w)


def load_seedvr2_dit(sd: Mapping[str, torch.Tensor], dtype: torch.dtype = torch.float32) -> SeedVR2DiT:
    """Build the transformer from a published-layout state dict (strict: every tensor must find its place)."""
    model = SeedVR2DiT(spec_from_state_dict(sd))
    model.load_state_dict({k: v.to(dtype) for k, v in sd.items()}, strict=True)
    return model.to(dtype).eval()
