"""`comfy.ldm.modules.attention`: the attention functions and transformer blocks packs call and subclass.

Every attention function takes q, k, v as [B, N, heads * dim_head] (or [B, heads, N, dim_head] with
`skip_reshape=True`), the head count, an optional mask, and returns [B, Nq, heads * dim_head] (or
[B, heads, Nq, dim_head] with `skip_output_reshape=True`). The variants compute the same softmax attention as
ComfyUI's of the same name, including how each one reads its mask:

* attention_basic / attention_split / attention_sub_quad: a float mask is added to the scores after being
  reshaped to (batch or 1, -1, Nq, Nk) and broadcast over batch and heads; attention_basic also takes a boolean
  mask over the keys (True = attend). With `attn_precision=torch.float32` the scores are computed in float32.
  split / sub_quad work on chunks of queries to bound memory (the chunking does not change the result).
* attention_pytorch: torch's scaled_dot_product_attention with the mask as given (a 2-d mask gains batch and
  head dimensions, a 3-d one a head dimension); boolean masks mean "attend" where True.

`optimized_attention` is attention_pytorch (ComfyUI's choice wherever torch's fused attention is available).
A pack can swap it (`comfy.ldm.modules.attention.optimized_attention = f`): the blocks below look it up at call
time, as ComfyUI's do. Note that this backend's own models do not run through this module, so such a swap
changes the pack's own modules only. `transformer_options["optimized_attention_override"]` is honoured by all
functions (it is called with the undecorated function first, then the arguments), as in ComfyUI 0.3.64.
"""

from __future__ import annotations

import functools
import importlib
import logging
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from comfy_bridge.compat.comfy import ops as comfy_ops
from comfy_bridge.compat.comfy.cli_args import args
from comfy_bridge.compat.comfy.ldm.modules.diffusionmodules.util import timestep_embedding
from comfy_bridge.packs.origin import UnsupportedFeature

__all__ = [
    "optimized_attention",
    "optimized_attention_masked",
    "optimized_attention_for_device",
    "attention_basic",
    "attention_pytorch",
    "attention_split",
    "attention_sub_quad",
    "attention_sage",
    "attention_xformers",
    "attention_flash",
    "wrap_attn",
    "register_attention_function",
    "get_attention_function",
    "exists",
    "default",
    "get_attn_precision",
    "GEGLU",
    "FeedForward",
    "Normalize",
    "CrossAttention",
    "BasicTransformerBlock",
    "SpatialTransformer",
    "timestep_embedding",
]

ops = comfy_ops.disable_weight_init
REGISTERED_ATTENTION_FUNCTIONS: dict[str, Callable] = {}
SAGE_ATTENTION_IS_AVAILABLE = False
FLASH_ATTENTION_IS_AVAILABLE = False
QUERY_CHUNK = 1024  # queries per chunk in attention_split / attention_sub_quad


def exists(val: Any) -> bool:
    return val is not None


def default(val: Any, d: Any) -> Any:
    return val if val is not None else d


def get_attn_precision(attn_precision: Any, current_dtype: torch.dtype) -> Any:
    """The dtype the scores are computed in (None: the inputs'); `--dont-upcast-attention` turns upcasting off."""
    if getattr(args, "dont_upcast_attention", False):
        return None
    return attn_precision


def wrap_attn(func: Callable) -> Callable:
    """Route a call through transformer_options["optimized_attention_override"](func, *args, **kwargs) when set
    (once: the override receives the undecorated function, and `__wrapped__` is that function too)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if "_inside_attn_wrapper" in kwargs:
            return func(*args, **kwargs)
        kwargs["_inside_attn_wrapper"] = True
        options = kwargs.get("transformer_options")
        if options is not None and "optimized_attention_override" in options:
            return options["optimized_attention_override"](func, *args, **kwargs)
        return func(*args, **kwargs)

    return wrapper


def register_attention_function(name: str, func: Callable) -> None:
    if name in REGISTERED_ATTENTION_FUNCTIONS:
        logging.warning("Attention function %s already registered, skipping registration.", name)
        return
    REGISTERED_ATTENTION_FUNCTIONS[name] = func


def get_attention_function(name: str, default: Any = ...) -> Callable | None:
    if name == "optimized":
        return optimized_attention
    if name in REGISTERED_ATTENTION_FUNCTIONS:
        return REGISTERED_ATTENTION_FUNCTIONS[name]
    if default is ...:
        raise KeyError(f"Attention function {name} not found.")
    return default


def heads_first(t: torch.Tensor, heads: int, skip_reshape: bool) -> torch.Tensor:
    """[B, N, heads * d] -> [B, heads, N, d] (already so with skip_reshape)."""
    if skip_reshape:
        return t
    b, n, inner = t.shape
    return t.reshape(b, n, heads, inner // heads).transpose(1, 2)


def heads_out(out: torch.Tensor, skip_output_reshape: bool) -> torch.Tensor:
    """[B, heads, N, d] -> [B, N, heads * d] (kept with skip_output_reshape)."""
    if skip_output_reshape:
        return out
    b, h, n, d = out.shape
    return out.transpose(1, 2).reshape(b, n, h * d)


def additive_mask(mask: torch.Tensor, sim: torch.Tensor) -> torch.Tensor:
    """A mask as ComfyUI's basic/split/sub-quadratic attention reads it, broadcastable to sim [B, heads, Nq, Nk]:
    a boolean one is over the keys of each batch item (True = attend); a float one is added, reshaped to
    (batch or 1, -1, mask rows, mask columns)."""
    if mask.dtype == torch.bool:
        keep = mask.reshape(mask.shape[0], 1, 1, -1)
        return torch.zeros((), dtype=sim.dtype, device=sim.device).masked_fill(~keep, -torch.finfo(sim.dtype).max)
    batch = 1 if mask.ndim == 2 else mask.shape[0]
    return mask.reshape(batch, -1, mask.shape[-2], mask.shape[-1])


def softmax_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None,
    upcast: bool,
    query_chunk: int | None = None,
) -> torch.Tensor:
    """softmax(q k^T / sqrt(d) + mask) v on [B, heads, N, d], scores in float32 when `upcast`."""
    scale = q.shape[-1] ** -0.5
    kt = (k.float() if upcast else k).transpose(-1, -2)
    step = query_chunk or q.shape[2]
    chunks = []
    for start in range(0, q.shape[2], step):
        qc = q[:, :, start : start + step]
        sim = torch.matmul(qc.float() if upcast else qc, kt) * scale
        if mask is not None:
            m = additive_mask(mask, sim)
            if m.shape[-2] != 1 and mask.dtype != torch.bool:
                m = m[..., start : start + step, :]
            sim = sim + m
        chunks.append(torch.matmul(sim.softmax(dim=-1).to(v.dtype), v))
    return chunks[0] if len(chunks) == 1 else torch.cat(chunks, dim=2)


def run_softmax_attention(
    q, k, v, heads, mask, attn_precision, skip_reshape, skip_output_reshape, query_chunk=None
) -> torch.Tensor:
    dtype = q.dtype
    upcast = get_attn_precision(attn_precision, dtype) == torch.float32
    q, k, v = (heads_first(t, heads, skip_reshape) for t in (q, k, v))
    return heads_out(softmax_attention(q, k, v, mask, upcast, query_chunk).to(dtype), skip_output_reshape)


@wrap_attn
def attention_basic(
    q, k, v, heads, mask=None, attn_precision=None, skip_reshape=False, skip_output_reshape=False, **kwargs
):
    return run_softmax_attention(q, k, v, heads, mask, attn_precision, skip_reshape, skip_output_reshape)


@wrap_attn
def attention_sub_quad(
    query, key, value, heads, mask=None, attn_precision=None, skip_reshape=False, skip_output_reshape=False, **kwargs
):
    return run_softmax_attention(
        query, key, value, heads, mask, attn_precision, skip_reshape, skip_output_reshape, QUERY_CHUNK
    )


@wrap_attn
def attention_split(
    q, k, v, heads, mask=None, attn_precision=None, skip_reshape=False, skip_output_reshape=False, **kwargs
):
    return run_softmax_attention(q, k, v, heads, mask, attn_precision, skip_reshape, skip_output_reshape, QUERY_CHUNK)


@wrap_attn
def attention_pytorch(
    q, k, v, heads, mask=None, attn_precision=None, skip_reshape=False, skip_output_reshape=False, **kwargs
):
    q, k, v = (heads_first(t, heads, skip_reshape) for t in (q, k, v))
    if mask is not None:
        if mask.ndim == 2:
            mask = mask.unsqueeze(0)
        if mask.ndim == 3:
            mask = mask.unsqueeze(1)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0, is_causal=False)
    return heads_out(out, skip_output_reshape)


def _optional_kernel(module: str, name: str) -> Callable | None:
    """`module.name` when that package is installed (a CUDA build of it), else None."""
    try:
        return getattr(importlib.import_module(module), name)
    except Exception:  # noqa: BLE001 - a missing or broken kernel build is "not available", as in ComfyUI
        return None


def _heads_4d(mask: torch.Tensor | None) -> torch.Tensor | None:
    """A 2-d mask gains batch and head dimensions, a 3-d one a head dimension (how the kernels read it)."""
    if mask is not None and mask.ndim == 2:
        mask = mask.unsqueeze(0)
    if mask is not None and mask.ndim == 3:
        mask = mask.unsqueeze(1)
    return mask


@wrap_attn
def attention_sage(
    q, k, v, heads, mask=None, attn_precision=None, skip_reshape=False, skip_output_reshape=False, **kwargs
):
    """SageAttention's quantized kernel when the sageattention package is installed; like ComfyUI's, any
    failure of it (here: the package is absent, it needs CUDA) logs and computes attention_pytorch instead."""
    q4, k4, v4 = (heads_first(t, heads, skip_reshape) for t in (q, k, v))
    mask = _heads_4d(mask)
    sageattn = _optional_kernel("sageattention", "sageattn")
    try:
        if sageattn is None:
            raise RuntimeError("the sageattention package is not installed")
        out = sageattn(q4, k4, v4, attn_mask=mask, is_causal=False, tensor_layout="HND")
    except Exception as e:  # noqa: BLE001 - ComfyUI falls back on any error of the kernel
        logging.error("Error running sage attention: %s, using pytorch attention instead.", e)
        out = F.scaled_dot_product_attention(q4, k4, v4, attn_mask=mask, dropout_p=0.0, is_causal=False)
    return heads_out(out, skip_output_reshape)


@wrap_attn
def attention_flash(
    q, k, v, heads, mask=None, attn_precision=None, skip_reshape=False, skip_output_reshape=False, **kwargs
):
    """flash-attn's kernel when that package is installed and there is no mask; like ComfyUI's, otherwise (or
    when the kernel fails) torch's scaled_dot_product_attention with the mask."""
    q4, k4, v4 = (heads_first(t, heads, skip_reshape) for t in (q, k, v))
    mask = _heads_4d(mask)
    flash = _optional_kernel("flash_attn", "flash_attn_func")
    try:
        if mask is not None:
            raise RuntimeError("Mask must not be set for Flash attention")
        if flash is None:
            raise RuntimeError("the flash-attn package is not installed")
        out = flash(q4.transpose(1, 2), k4.transpose(1, 2), v4.transpose(1, 2), dropout_p=0.0, causal=False).transpose(
            1, 2
        )
    except Exception as e:  # noqa: BLE001 - ComfyUI falls back on any error of the kernel
        logging.warning("Flash Attention failed, using default SDPA: %s", e)
        out = F.scaled_dot_product_attention(q4, k4, v4, attn_mask=mask, dropout_p=0.0, is_causal=False)
    return heads_out(out, skip_output_reshape)


@wrap_attn
def attention_xformers(
    q, k, v, heads, mask=None, attn_precision=None, skip_reshape=False, skip_output_reshape=False, **kwargs
):
    """xformers' memory-efficient attention. Without the xformers package this raises, as ComfyUI's does
    (there a NameError on `xformers`; here an error saying so)."""
    efficient = _optional_kernel("xformers.ops", "memory_efficient_attention")
    if efficient is None:
        raise UnsupportedFeature(
            "comfy.ldm.modules.attention.attention_xformers",
            "the xformers package is not installed (ComfyUI raises here too without it); use attention_pytorch",
        )
    q4, k4, v4 = (heads_first(t, heads, skip_reshape).transpose(1, 2) for t in (q, k, v))  # [B, N, heads, d]
    mask = _heads_4d(mask)
    if mask is not None:
        mask = mask.to(q4.dtype).expand(q4.shape[0], heads, q4.shape[1], mask.shape[-1])
    out = efficient(q4, k4, v4, attn_bias=mask).transpose(1, 2)
    return heads_out(out, skip_output_reshape)


optimized_attention = attention_pytorch
optimized_attention_masked = optimized_attention

register_attention_function("pytorch", attention_pytorch)
register_attention_function("sub_quad", attention_sub_quad)
register_attention_function("split", attention_split)


def optimized_attention_for_device(device: Any, mask: bool = False, small_input: bool = False) -> Callable:
    return attention_pytorch


class GEGLU(nn.Module):
    def __init__(self, dim_in, dim_out, dtype=None, device=None, operations=ops):
        super().__init__()
        self.proj = operations.Linear(dim_in, dim_out * 2, dtype=dtype, device=device)

    def forward(self, x):
        value, gate = self.proj(x).chunk(2, dim=-1)
        return value * F.gelu(gate)


class FeedForward(nn.Module):
    """Linear -> GELU (or GEGLU when `glu`) -> dropout -> Linear; parameter names as ComfyUI's (net.0..., net.2)."""

    def __init__(self, dim, dim_out=None, mult=4, glu=False, dropout=0.0, dtype=None, device=None, operations=ops):
        super().__init__()
        inner = int(dim * mult)
        dim_out = default(dim_out, dim)
        if glu:
            project_in = GEGLU(dim, inner, dtype=dtype, device=device, operations=operations)
        else:
            project_in = nn.Sequential(operations.Linear(dim, inner, dtype=dtype, device=device), nn.GELU())
        self.net = nn.Sequential(
            project_in, nn.Dropout(dropout), operations.Linear(inner, dim_out, dtype=dtype, device=device)
        )

    def forward(self, x):
        return self.net(x)


def Normalize(in_channels, dtype=None, device=None):
    return nn.GroupNorm(num_groups=32, num_channels=in_channels, eps=1e-6, affine=True, dtype=dtype, device=device)


class CrossAttention(nn.Module):
    """to_q / to_k / to_v (no bias) and to_out (Linear, Dropout); attention of x over `context` (x itself by
    default), values from `value` when given."""

    def __init__(
        self,
        query_dim,
        context_dim=None,
        heads=8,
        dim_head=64,
        dropout=0.0,
        attn_precision=None,
        dtype=None,
        device=None,
        operations=ops,
    ):
        super().__init__()
        inner = dim_head * heads
        context_dim = default(context_dim, query_dim)
        self.attn_precision = attn_precision
        self.heads = heads
        self.dim_head = dim_head
        self.to_q = operations.Linear(query_dim, inner, bias=False, dtype=dtype, device=device)
        self.to_k = operations.Linear(context_dim, inner, bias=False, dtype=dtype, device=device)
        self.to_v = operations.Linear(context_dim, inner, bias=False, dtype=dtype, device=device)
        self.to_out = nn.Sequential(
            operations.Linear(inner, query_dim, dtype=dtype, device=device), nn.Dropout(dropout)
        )

    def forward(self, x, context=None, value=None, mask=None, transformer_options={}):
        context = default(context, x)
        q, k = self.to_q(x), self.to_k(context)
        v = self.to_v(value if value is not None else context)
        if mask is None:
            out = optimized_attention(
                q, k, v, self.heads, attn_precision=self.attn_precision, transformer_options=transformer_options
            )
        else:
            out = optimized_attention_masked(
                q, k, v, self.heads, mask, attn_precision=self.attn_precision, transformer_options=transformer_options
            )
        return self.to_out(out)


class BasicTransformerBlock(nn.Module):
    """Self-attention, cross-attention and feed-forward, each pre-normed and residual, with ComfyUI's
    transformer_options patch points: patches attn1_patch / attn1_output_patch / middle_patch / attn2_patch /
    attn2_output_patch and patches_replace["attn1" / "attn2"] keyed by (block name, block id, block index) or
    (block name, block id)."""

    def __init__(
        self,
        dim,
        n_heads,
        d_head,
        dropout=0.0,
        context_dim=None,
        gated_ff=True,
        checkpoint=True,
        ff_in=False,
        inner_dim=None,
        disable_self_attn=False,
        disable_temporal_crossattention=False,
        switch_temporal_ca_to_sa=False,
        attn_precision=None,
        dtype=None,
        device=None,
        operations=ops,
    ):
        super().__init__()
        self.ff_in = ff_in or inner_dim is not None
        inner_dim = default(inner_dim, dim)
        self.is_res = inner_dim == dim
        self.attn_precision = attn_precision
        if self.ff_in:
            self.norm_in = operations.LayerNorm(dim, dtype=dtype, device=device)
            self.ff_in = FeedForward(
                dim, dim_out=inner_dim, dropout=dropout, glu=gated_ff, dtype=dtype, device=device, operations=operations
            )
        self.disable_self_attn = disable_self_attn
        self.attn1 = CrossAttention(
            query_dim=inner_dim,
            heads=n_heads,
            dim_head=d_head,
            dropout=dropout,
            context_dim=context_dim if disable_self_attn else None,
            attn_precision=attn_precision,
            dtype=dtype,
            device=device,
            operations=operations,
        )
        self.ff = FeedForward(
            inner_dim, dim_out=dim, dropout=dropout, glu=gated_ff, dtype=dtype, device=device, operations=operations
        )
        if disable_temporal_crossattention:
            if switch_temporal_ca_to_sa:
                raise ValueError("switch_temporal_ca_to_sa needs the temporal cross-attention")
            self.attn2 = None
        else:
            self.attn2 = CrossAttention(
                query_dim=inner_dim,
                context_dim=None if switch_temporal_ca_to_sa else context_dim,
                heads=n_heads,
                dim_head=d_head,
                dropout=dropout,
                attn_precision=attn_precision,
                dtype=dtype,
                device=device,
                operations=operations,
            )
            self.norm2 = operations.LayerNorm(inner_dim, dtype=dtype, device=device)
        self.norm1 = operations.LayerNorm(inner_dim, dtype=dtype, device=device)
        self.norm3 = operations.LayerNorm(inner_dim, dtype=dtype, device=device)
        self.n_heads = n_heads
        self.d_head = d_head
        self.switch_temporal_ca_to_sa = switch_temporal_ca_to_sa

    @staticmethod
    def replacement(replace: dict, block_key: Any, block: Any) -> Callable | None:
        if block_key in replace:
            return replace[block_key]
        return replace.get(block) if block is not None else None

    def attend(self, attn: CrossAttention, n, context, value, replace, transformer_options, extra_options):
        if replace is None:
            return attn(n, context=context, value=value, transformer_options=transformer_options)
        context = default(context, n)
        value = default(value, context)
        out = replace(attn.to_q(n), attn.to_k(context), attn.to_v(value), extra_options)
        return attn.to_out(out)

    def forward(self, x, context=None, transformer_options={}):
        patches = transformer_options.get("patches", {})
        replace = transformer_options.get("patches_replace", {})
        extra_options = {
            key: val for key, val in transformer_options.items() if key not in ("patches", "patches_replace")
        }
        extra_options.update(n_heads=self.n_heads, dim_head=self.d_head, attn_precision=self.attn_precision)
        block = transformer_options.get("block")
        block_key = (block[0], block[1], transformer_options.get("block_index", 0)) if block is not None else None

        if self.ff_in:
            skip = x
            x = self.ff_in(self.norm_in(x))
            if self.is_res:
                x = x + skip

        n = self.norm1(x)
        context1 = context if self.disable_self_attn else None
        value1 = None
        if "attn1_patch" in patches:
            context1 = default(context1, n)
            value1 = context1
            for p in patches["attn1_patch"]:
                n, context1, value1 = p(n, context1, value1, extra_options)
        n = self.attend(
            self.attn1,
            n,
            context1,
            value1,
            self.replacement(replace.get("attn1", {}), block_key, block),
            transformer_options,
            extra_options,
        )
        for p in patches.get("attn1_output_patch", []):
            n = p(n, extra_options)
        x = n + x
        for p in patches.get("middle_patch", []):
            x = p(x, extra_options)

        if self.attn2 is not None:
            n = self.norm2(x)
            context2 = n if self.switch_temporal_ca_to_sa else context
            value2 = None
            if "attn2_patch" in patches:
                value2 = context2
                for p in patches["attn2_patch"]:
                    n, context2, value2 = p(n, context2, value2, extra_options)
            n = self.attend(
                self.attn2,
                n,
                context2,
                value2,
                self.replacement(replace.get("attn2", {}), block_key, block),
                transformer_options,
                extra_options,
            )
        for p in patches.get("attn2_output_patch", []):
            n = p(n, extra_options)
        x = n + x
        out = self.ff(self.norm3(x))
        return x + out if self.is_res else out


class SpatialTransformer(nn.Module):
    """GroupNorm, projection in (1x1 conv, or Linear with use_linear), `depth` BasicTransformerBlocks over the
    h*w tokens, projection out, plus the input. Parameter names and shapes as ComfyUI's."""

    def __init__(
        self,
        in_channels,
        n_heads,
        d_head,
        depth=1,
        dropout=0.0,
        context_dim=None,
        disable_self_attn=False,
        use_linear=False,
        use_checkpoint=True,
        attn_precision=None,
        dtype=None,
        device=None,
        operations=ops,
    ):
        super().__init__()
        if context_dim is not None and not isinstance(context_dim, list):
            context_dim = [context_dim] * depth
        elif context_dim is None:
            context_dim = [None] * depth
        self.in_channels = in_channels
        inner = n_heads * d_head
        self.norm = operations.GroupNorm(
            num_groups=32, num_channels=in_channels, eps=1e-6, affine=True, dtype=dtype, device=device
        )
        if use_linear:
            self.proj_in = operations.Linear(in_channels, inner, dtype=dtype, device=device)
            # ComfyUI declares the linear projection out as (in_channels -> inner): the same shape as its
            # checkpoints when in_channels == inner, which is the case for every model that uses it.
            self.proj_out = operations.Linear(in_channels, inner, dtype=dtype, device=device)
        else:
            self.proj_in = operations.Conv2d(
                in_channels, inner, kernel_size=1, stride=1, padding=0, dtype=dtype, device=device
            )
            self.proj_out = operations.Conv2d(
                inner, in_channels, kernel_size=1, stride=1, padding=0, dtype=dtype, device=device
            )
        self.transformer_blocks = nn.ModuleList(
            [
                BasicTransformerBlock(
                    inner,
                    n_heads,
                    d_head,
                    dropout=dropout,
                    context_dim=context_dim[d],
                    disable_self_attn=disable_self_attn,
                    checkpoint=use_checkpoint,
                    attn_precision=attn_precision,
                    dtype=dtype,
                    device=device,
                    operations=operations,
                )
                for d in range(depth)
            ]
        )
        self.use_linear = use_linear

    def forward(self, x, context=None, transformer_options={}):
        if not isinstance(context, list):
            context = [context] * len(self.transformer_blocks)
        _, _, h, w = x.shape
        transformer_options["activations_shape"] = list(x.shape)
        x_in = x
        x = self.norm(x)
        if not self.use_linear:
            x = self.proj_in(x)
        x = x.movedim(1, 3).flatten(1, 2).contiguous()
        if self.use_linear:
            x = self.proj_in(x)
        for i, block in enumerate(self.transformer_blocks):
            transformer_options["block_index"] = i
            x = block(x, context=context[i], transformer_options=transformer_options)
        if self.use_linear:
            x = self.proj_out(x)
        x = x.reshape(x.shape[0], h, w, x.shape[-1]).movedim(3, 1).contiguous()
        if not self.use_linear:
            x = self.proj_out(x)
        return x + x_in


from comfy_bridge.compat.comfy.ldm.model_classes import UnsupportedModel  # noqa: E402


class SpatialVideoTransformer(UnsupportedModel, SpatialTransformer):
    """SVD's spatial-temporal transformer: for subclassing and isinstance checks (SVD runs on the executors)."""
