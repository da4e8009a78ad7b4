"""Patches inside the diffusion network, carried by a MODEL as data (ComfyUI's transformer_options patches:
output_block_patch, input_block_patch(_after_skip), attn1/attn2 patches, output patches and replacements).

A patched MODEL is its ModelRef with a `network_patches` option: (hook, key, function) entries in the order
the nodes added them; the functions are module-level dataclasses, so they pickle by name to the executors.
The weights are the plain model's (model_options.weights_ref drops the option), so caches are shared. Inside a
denoise step, `apply_model` installs the entries as torch hooks and attention processors on the diffusers
UNet for that one forward pass and removes them afterwards: the cached module is never changed.

Hook signatures are ComfyUI's: output_block_patch(h, hsp, options) -> (h, hsp); input_block_patch(h, options)
-> h; attnN_patch(n, context, value, options) -> (n, context, value); attnN_output_patch(n, options) -> n;
attnN_replace(q, k, v, options) -> attention output (key: (block_kind, block_id) or with the transformer
index). `options` holds "block" (("input"|"middle"|"output", id) in ldm numbering), "block_index", "sigmas",
"cond_or_uncond", "original_shape", "n_heads", "dim_head", "model_channels" and "model_options" (the step's
model_options, through which a patch can leave something for the step's guidance functions, as SAG does).

On Flux and SD3, dit_replace(args, extra) -> {"img", "txt"} replaces a block (key ("double_block" |
"single_block", index); SD3's joint blocks are double blocks): args "img", "txt" (a single block sees them
joined, text first), "vec", "pe" (diffusers' rotary embedding; None on SD3) and "transformer_options"; extra
"original_block". The block is swapped for the call only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from cluster.refs import ModelRef
from nodes.modelfns.model_options import NETWORK
from nodes.modelfns.shared_forward import network_apply
from nodes.models.components import DiffusionModel

Entry = tuple[str, Any, Callable]
# The model_options key under which a denoise step offers calc_cond_batch(model, conds, x, sigma, model_options)
# to its guidance functions.
CALC_COND = "calc_cond_batch"
# A model_options entry wrapper(predict, x, sigma, state) -> prediction around the step's whole guided prediction
# (ComfyUI's PREDICT_NOISE wrapper); `state` is the step's sampler state, which travels to the next step.
PREDICT_NOISE = "predict_noise_wrapper"
# A model_options entry wrapper(forward, x, sigma, keys, state, evaluation) -> output around each forward pass of
# the diffusion model (ComfyUI's DIFFUSION_MODEL wrapper): x is the pass's model input, one chunk per cond entry
# (keys: their conditioning keys, in batch order), `state` the step's sampler state and `evaluation` scratch
# shared by the passes of one guided prediction (what ComfyUI's calc_cond_batch wrappers see).
DIFFUSION_MODEL = "diffusion_model_wrapper"
HOOKS = (
    "output_block_patch",
    "input_block_patch",
    "input_block_patch_after_skip",
    "attn1_patch",
    "attn2_patch",
    "attn1_output_patch",
    "attn2_output_patch",
    "attn1_replace",
    "attn2_replace",
    "dit_replace",
)


def with_network_patch(model: ModelRef, hook: str, fn: Callable, key: Any = None) -> ModelRef:
    """ComfyUI's set_model_*_patch (appends) or set_model_attn*_replace (key: the block it replaces)."""
    if hook not in HOOKS:
        raise ValueError(f"unknown network hook {hook!r}")
    return model.with_option(NETWORK, tuple(model.option(NETWORK, ())) + ((hook, key, fn),))


def with_extra(patches: dict, entries: tuple[Entry, ...]) -> dict:
    """model_options with more network entries (ComfyUI's set_model_options_patch_replace on a copy)."""
    return {**patches, NETWORK: tuple(patches.get(NETWORK, ())) + tuple(entries)}


def apply_model(
    model: DiffusionModel,
    patches: dict,
    x: torch.Tensor,
    t: torch.Tensor,
    cond: dict[str, Any],
    sigma: torch.Tensor,
    cond_or_uncond: list[int],
) -> torch.Tensor:
    """model.apply with the step's network patches installed for this call only. Architectures without
    ldm UNet blocks (the DiTs) have none of these hook points, so ComfyUI ignores the patches there too."""
    entries = tuple(patches.get(NETWORK, ()))
    module = model.module
    if entries and hasattr(module, "transformer_blocks"):  # the DiTs: Flux, SD3
        with dit_replaced(
            module,
            entries,
            {"sigmas": sigma.reshape(-1), "cond_or_uncond": list(cond_or_uncond), "model_options": patches},
        ):
            return model.apply(x, t, cond)
    if not entries or not hasattr(module, "up_blocks"):
        return network_apply(model, x, t, cond)  # shared with other requests' steps in a batch
    options = {
        "sigmas": sigma.reshape(-1),
        "cond_or_uncond": list(cond_or_uncond),
        "original_shape": list(x.shape),
        "model_channels": int(module.config.block_out_channels[0]),
        "model_options": patches,
    }
    with installed(module, entries, options):
        return model.apply(x, t, cond)


class _WrappedPrediction:
    """A denoiser whose calls go through a predict-noise wrapper; everything else is the denoiser's."""

    def __init__(self, denoiser: Callable, wrapper: Callable, state: dict[str, torch.Tensor]) -> None:
        self.denoiser, self.wrapper, self.state = denoiser, wrapper, state

    def __call__(self, x: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        return self.wrapper(self.denoiser, x, sigma, self.state)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.denoiser, name)


def wrap_prediction(denoiser: Callable, patches: dict, state: dict[str, torch.Tensor]) -> Callable:
    """The denoiser, through the MODEL's predict-noise wrapper if it has one."""
    wrapper = patches.get(PREDICT_NOISE)
    return denoiser if wrapper is None else _WrappedPrediction(denoiser, wrapper, state)


def wrap_forward(
    patches: dict,
    forward: Callable[[torch.Tensor], torch.Tensor],
    x: torch.Tensor,
    sigma: torch.Tensor,
    keys: list[str],
    state: dict[str, torch.Tensor] | None,
    evaluation: dict[str, Any],
) -> torch.Tensor:
    """One forward pass, through the MODEL's diffusion-model wrapper if it has one."""
    wrapper = patches.get(DIFFUSION_MODEL)
    if wrapper is None or state is None:
        return forward(x)
    return wrapper(forward, x, sigma, keys, state, evaluation)


def _first(out: Any) -> torch.Tensor:
    return out[0] if isinstance(out, tuple) else out


def _replace_first(out: Any, h: torch.Tensor) -> Any:
    return (h,) + tuple(out[1:]) if isinstance(out, tuple) else h


def _input_blocks(unet: nn.Module) -> list[tuple[int, nn.Module, nn.Module]]:
    """(ldm input block id, first module, last module) in the order ldm runs them."""
    blocks = [(0, unet.conv_in, unet.conv_in)]
    for down in unet.down_blocks:
        attns = getattr(down, "attentions", None)
        for j, resnet in enumerate(down.resnets):
            blocks.append((len(blocks), resnet, attns[j] if attns else resnet))
        for sampler in down.downsamplers or ():
            blocks.append((len(blocks), sampler, sampler))
    return blocks


class _ForwardPassHooks:
    """The hooks of one forward pass and the skips they pass between them."""

    def __init__(self, entries: tuple[Entry, ...], options: dict[str, Any]) -> None:
        self.entries, self.options = entries, options
        self.skips: list[torch.Tensor] = []
        self.pending: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def fns(self, hook: str) -> list[Callable]:
        return [fn for h, _, fn in self.entries if h == hook]

    def opts(self, block: tuple[str, int], **extra: Any) -> dict[str, Any]:
        return {**self.options, "block": block, **extra}

    def output_patch(self, o: int, h: torch.Tensor, hsp: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        for fn in self.fns("output_block_patch"):
            h, hsp = fn(h, hsp, self.opts(("output", o)))
        return h, hsp


@contextmanager
def installed(unet: nn.Module, entries: tuple[Entry, ...], options: dict[str, Any]) -> Iterator[None]:
    """Install the entries on a diffusers UNet2DConditionModel; everything is undone on exit."""
    run = _ForwardPassHooks(entries, options)
    with ExitStack() as stack:
        hook = lambda handle: stack.callback(handle.remove)  # noqa: E731
        blocks = _input_blocks(unet)
        for k, (bid, _, last) in enumerate(blocks):
            if run.fns("input_block_patch"):
                hook(last.register_forward_hook(_input_hook(run, bid)))
            if run.fns("input_block_patch_after_skip"):
                # The skip keeps the block's output; only the next module sees the patched one.
                nxt = blocks[k + 1][1] if k + 1 < len(blocks) else (unet.mid_block or unet.up_blocks[0])
                hook(nxt.register_forward_pre_hook(_after_skip_hook(run, bid)))
        if run.fns("output_block_patch"):
            o = 0
            for up in unet.up_blocks:
                hook(up.register_forward_pre_hook(_up_block_hook(run, o), with_kwargs=True))
                attns = getattr(up, "attentions", None)
                for j in range(1, len(up.resnets)):
                    producer = attns[j - 1] if attns else up.resnets[j - 1]
                    hook(producer.register_forward_hook(_producer_hook(run, o + j, j)))
                    hook(up.resnets[j].register_forward_pre_hook(_consumer_hook(run, o + j)))
                o += len(up.resnets)
        if any(h.startswith("attn") for h, _, _ in entries):
            for attn, block, index, which in _attentions(unet):
                old = attn.processor
                attn.set_processor(_Processor(run, block, index, which))
                stack.callback(attn.set_processor, old)
        yield


def _input_hook(run: _ForwardPassHooks, bid: int) -> Callable:
    def hook(module: nn.Module, args: tuple, out: Any) -> Any:
        h = _first(out)
        for fn in run.fns("input_block_patch"):
            h = fn(h, run.opts(("input", bid)))
        return _replace_first(out, h)

    return hook


def _after_skip_hook(run: _ForwardPassHooks, bid: int) -> Callable:
    def hook(module: nn.Module, args: tuple) -> tuple:
        h = args[0]
        for fn in run.fns("input_block_patch_after_skip"):
            h = fn(h, run.opts(("input", bid)))
        return (h,) + tuple(args[1:])

    return hook


def _up_block_hook(run: _ForwardPassHooks, o: int) -> Callable:
    """First output block of an up block: h and the skips arrive as the block's arguments."""

    def hook(module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        skips = list(kwargs["res_hidden_states_tuple"])
        h, skips[-1] = run.output_patch(o, kwargs["hidden_states"], skips[-1])
        run.skips = skips
        return args, {**kwargs, "hidden_states": h, "res_hidden_states_tuple": tuple(skips)}

    return hook


def _producer_hook(run: _ForwardPassHooks, o: int, j: int) -> Callable:
    """Later output blocks of an up block: h is the previous resnet/attention's output."""

    def hook(module: nn.Module, args: tuple, out: Any) -> Any:
        hsp = run.skips[-(j + 1)]
        h, new_hsp = run.output_patch(o, _first(out), hsp)
        if new_hsp is not hsp:
            run.pending[o] = (h, new_hsp)
        return _replace_first(out, h)

    return hook


def _consumer_hook(run: _ForwardPassHooks, o: int) -> Callable:
    """The resnet after the concatenation: swaps in a skip the patch replaced."""

    def hook(module: nn.Module, args: tuple) -> tuple | None:
        if o not in run.pending:
            return None
        h, hsp = run.pending.pop(o)
        return (torch.cat([h, hsp], dim=1),) + tuple(args[1:])

    return hook


def _attentions(unet: nn.Module) -> Iterator[tuple[nn.Module, tuple[str, int], int, str]]:
    """(diffusers Attention, ldm block, transformer index, "attn1"|"attn2") of every transformer block."""

    def of(transformer: nn.Module, block: tuple[str, int]):
        for index, tb in enumerate(transformer.transformer_blocks):
            for which in ("attn1", "attn2"):
                if getattr(tb, which, None) is not None:
                    yield getattr(tb, which), block, index, which

    bid = 1
    for down in unet.down_blocks:
        attns = getattr(down, "attentions", None)
        for j in range(len(down.resnets)):
            if attns:
                yield from of(attns[j], ("input", bid))
            bid += 1
        bid += len(down.downsamplers or ())
    if unet.mid_block is not None:
        for transformer in getattr(unet.mid_block, "attentions", ()):
            yield from of(transformer, ("middle", 0))
    o = 0
    for up in unet.up_blocks:
        attns = getattr(up, "attentions", None)
        for j in range(len(up.resnets)):
            if attns:
                yield from of(attns[j], ("output", o))
            o += 1


class _Processor:
    """A diffusers attention processor running ComfyUI's attention patch points around plain attention."""

    def __init__(self, run: _ForwardPassHooks, block: tuple[str, int], index: int, which: str) -> None:
        self.run, self.block, self.index, self.which = run, block, index, which

    def _replacement(self) -> Callable | None:
        found = {key: fn for h, key, fn in self.run.entries if h == f"{self.which}_replace"}
        return found.get(self.block + (self.index,), found.get(self.block))

    def __call__(
        self,
        attn: nn.Module,
        hidden_states: torch.Tensor,
        encoder_hidden_states: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        temb: torch.Tensor | None = None,
        *args: Any,
        **kwargs: Any,
    ) -> torch.Tensor:
        heads = attn.heads
        opts = self.run.opts(self.block, block_index=self.index, n_heads=heads, dim_head=attn.inner_dim // heads)
        n, context, value = hidden_states, encoder_hidden_states, None
        patches = self.run.fns(f"{self.which}_patch")
        if patches:
            context = n if context is None else context
            value = context
            for fn in patches:
                n, context, value = fn(n, context, value, opts)
        context = n if context is None else context
        value = context if value is None else value
        q, k, v = attn.to_q(n), attn.to_k(context), attn.to_v(value)
        replacement = self._replacement()
        out = replacement(q, k, v, opts) if replacement is not None else attention(q, k, v, heads, attention_mask)
        out = attn.to_out[1](attn.to_out[0](out))
        for fn in self.run.fns(f"{self.which}_output_patch"):
            out = fn(out, opts)
        return out


def attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, heads: int, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Multi-head scaled dot-product attention on [B, N, heads * dim] projections (ComfyUI's
    optimized_attention convention)."""
    b, dim = q.shape[0], q.shape[-1] // heads
    q, k, v = (t.reshape(b, -1, heads, dim).transpose(1, 2) for t in (q, k, v))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return out.transpose(1, 2).reshape(b, -1, heads * dim)


@contextmanager
def dit_replaced(dit: nn.Module, entries: tuple[Entry, ...], options: dict[str, Any]) -> Iterator[None]:
    """Swap the Flux/SD3 blocks that have a dit_replace entry for a wrapper calling it; swapped back on exit.
    Keys naming blocks the model does not have are ignored, as ComfyUI's loop never reaches them (SD3's
    joint blocks are its double blocks; it has no single blocks)."""
    lists = {"double_block": dit.transformer_blocks, "single_block": getattr(dit, "single_transformer_blocks", ())}
    swapped = []
    try:
        for hook, key, fn in entries:
            if hook == "dit_replace" and key[0] in lists and key[1] < len(lists[key[0]]):
                blocks = lists[key[0]]
                swapped.append((blocks, key[1], blocks[key[1]]))
                blocks[key[1]] = _ReplacedBlock(blocks[key[1]], fn, key[0] == "single_block", options)
        yield
    finally:
        for blocks, i, original in reversed(swapped):
            blocks[i] = original


class _ReplacedBlock(nn.Module):
    """A diffusers Flux or SD3 block whose call goes through a ComfyUI-style block replacement."""

    def __init__(self, original: nn.Module, fn: Callable, single: bool, options: dict[str, Any]) -> None:
        super().__init__()
        object.__setattr__(self, "original", original)  # not a child: the swap must not re-parent it
        self.fn, self.single, self.options = fn, single, options

    def forward(
        self,
        hidden_states: torch.Tensor,
        encoder_hidden_states: torch.Tensor,
        temb: torch.Tensor,
        image_rotary_emb: Any = None,
        joint_attention_kwargs: Any = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        text = encoder_hidden_states.shape[1]
        args = {"vec": temb, "pe": image_rotary_emb, "attn_mask": None, "transformer_options": self.options}

        def run(img: torch.Tensor, txt: torch.Tensor, a: dict) -> tuple[torch.Tensor, torch.Tensor]:
            rope = {} if a["pe"] is None else {"image_rotary_emb": a["pe"]}  # SD3's blocks take no RoPE
            return self.original(
                hidden_states=img,
                encoder_hidden_states=txt,
                temb=a["vec"],
                joint_attention_kwargs=joint_attention_kwargs,
                **rope,
            )

        if self.single:

            def original_single(a: dict) -> dict:
                txt, img = run(a["img"][:, text:], a["img"][:, :text], a)
                return {"img": torch.cat([txt, img], dim=1)}

            out = self.fn(
                {**args, "img": torch.cat([encoder_hidden_states, hidden_states], dim=1)},
                {"original_block": original_single},
            )
            return out["img"][:, :text], out["img"][:, text:]

        def original_double(a: dict) -> dict:
            txt, img = run(a["img"], a["txt"], a)
            return {"img": img, "txt": txt}

        out = self.fn({**args, "img": hidden_states, "txt": encoder_hidden_states}, {"original_block": original_double})
        return out["txt"], out["img"]
