"""`comfy.ops`: the layer classes packs build their own modules from. `disable_weight_init.X` is torch's
`nn.X` with the initialisation skipped (the weights are about to be loaded, so random init is wasted
time); `manual_cast.X` also casts its weight and bias to the input's dtype and device on each call
(weights stored in one dtype, run in another). `weight_function` / `bias_function` lists are applied to
the cast weights, as ComfyUI's LoRA-on-the-fly hooks do."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F


def cast_to_input(
    weight: torch.Tensor, input: torch.Tensor, non_blocking: bool = False, copy: bool = True
) -> torch.Tensor:
    return weight.to(device=input.device, dtype=input.dtype, non_blocking=non_blocking, copy=copy)


def cast_bias_weight(
    s: torch.nn.Module,
    input: torch.Tensor | None = None,
    dtype: torch.dtype | None = None,
    device: torch.device | None = None,
    bias_dtype: torch.dtype | None = None,
    offloadable: bool = False,
) -> tuple:
    """(weight, bias) of layer `s` in the input's dtype / device, with its weight / bias functions applied.

    With offloadable=True (ComfyUI since 0.4) a third item is the offload stream to hand to
    uncast_bias_weight: always None here, as this process copies weights synchronously.
    """
    if input is not None:
        dtype = dtype or input.dtype
        bias_dtype = bias_dtype or dtype
        device = device or input.device
    bias = None
    if getattr(s, "bias", None) is not None:
        bias = s.bias.to(device=device, dtype=bias_dtype)
        for f in s.bias_function:
            bias = f(bias)
    weight = s.weight.to(device=device, dtype=dtype)
    for f in s.weight_function:
        weight = f(weight)
    return (weight, bias, None) if offloadable else (weight, bias)


def uncast_bias_weight(
    s: torch.nn.Module, weight: torch.Tensor | None, bias: torch.Tensor | None, offload_stream: Any
) -> None:
    """The end of a use of what cast_bias_weight(offloadable=True) gave. Our casts are synchronous (their
    stream is None), so as in ComfyUI without a stream there is nothing to wait for."""


def cast_to(
    weight: torch.Tensor,
    dtype: torch.dtype | None = None,
    device: Any = None,
    non_blocking: bool = False,
    copy: bool = False,
    stream: Any = None,
) -> torch.Tensor:
    from comfy_bridge.compat.comfy.model_management import cast_to as cast

    return cast(weight, dtype, device, non_blocking, copy, stream)


class CastWeightBiasOp:
    comfy_cast_weights = False
    weight_function: list[Callable] = []
    bias_function: list[Callable] = []

    def reset_parameters(self) -> None:
        return None  # no random init: the weights are loaded right after

    def _apply_op(self, input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, *rest: Any) -> Any:
        raise NotImplementedError

    def forward(self, input: torch.Tensor, *rest: Any, **kwargs: Any) -> Any:
        if self.comfy_cast_weights or self.weight_function or self.bias_function:
            weight, bias = cast_bias_weight(self, input)
            return self._apply_op(input, weight, bias, *rest, *kwargs.values())
        return super().forward(input, *rest, **kwargs)  # type: ignore[misc]


def _conv(input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, self: Any) -> torch.Tensor:
    return self._conv_forward(input, weight, bias)


def _conv_transpose(fn: Callable, dims: int) -> Callable:
    def op(
        self: Any, input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, output_size: Any = None
    ) -> torch.Tensor:
        pad = self._output_padding(input, output_size, self.stride, self.padding, self.kernel_size, dims, self.dilation)
        return fn(input, weight, bias, self.stride, self.padding, pad, self.groups, self.dilation)

    return op


class disable_weight_init:
    class Linear(CastWeightBiasOp, torch.nn.Linear):
        def _apply_op(self, input, weight, bias):
            return F.linear(input, weight, bias)

    class Conv1d(CastWeightBiasOp, torch.nn.Conv1d):
        def _apply_op(self, input, weight, bias):
            return _conv(input, weight, bias, self)

    class Conv2d(CastWeightBiasOp, torch.nn.Conv2d):
        def _apply_op(self, input, weight, bias):
            return _conv(input, weight, bias, self)

    class Conv3d(CastWeightBiasOp, torch.nn.Conv3d):
        def _apply_op(self, input, weight, bias):
            return _conv(input, weight, bias, self)

    class GroupNorm(CastWeightBiasOp, torch.nn.GroupNorm):
        def _apply_op(self, input, weight, bias):
            return F.group_norm(input, self.num_groups, weight, bias, self.eps)

    class LayerNorm(CastWeightBiasOp, torch.nn.LayerNorm):
        def _apply_op(self, input, weight, bias):
            return F.layer_norm(input, self.normalized_shape, weight, bias, self.eps)

    class RMSNorm(CastWeightBiasOp, torch.nn.RMSNorm):
        def _apply_op(self, input, weight, bias):
            return F.rms_norm(input, self.normalized_shape, weight, self.eps)

    class ConvTranspose1d(CastWeightBiasOp, torch.nn.ConvTranspose1d):
        _apply_op = _conv_transpose(F.conv_transpose1d, 1)

    class ConvTranspose2d(CastWeightBiasOp, torch.nn.ConvTranspose2d):
        _apply_op = _conv_transpose(F.conv_transpose2d, 2)

    class Embedding(CastWeightBiasOp, torch.nn.Embedding):
        def _apply_op(self, input, weight, bias):
            return F.embedding(
                input, weight, self.padding_idx, self.max_norm, self.norm_type, self.scale_grad_by_freq, self.sparse
            )

        def forward(self, input: torch.Tensor, out_dtype: torch.dtype | None = None) -> torch.Tensor:
            # Indices carry no dtype to cast to: the weight keeps its own (or out_dtype).
            if self.comfy_cast_weights or self.weight_function or self.bias_function:
                weight, _ = cast_bias_weight(self, device=input.device, dtype=out_dtype or self.weight.dtype)
                return self._apply_op(input, weight, None)
            out = torch.nn.Embedding.forward(self, input)
            return out if out_dtype is None else out.to(out_dtype)

    @classmethod
    def conv_nd(cls, dims: int, *args: Any, **kwargs: Any) -> torch.nn.Module:
        convs = {1: cls.Conv1d, 2: cls.Conv2d, 3: cls.Conv3d}
        if dims not in convs:
            raise ValueError(f"unsupported dimensions: {dims}")
        return convs[dims](*args, **kwargs)


def _casting(base: type) -> type:
    return type(base.__name__, (base,), {"comfy_cast_weights": True, "__qualname__": f"manual_cast.{base.__name__}"})


class manual_cast(disable_weight_init):
    Linear = _casting(disable_weight_init.Linear)
    Conv1d = _casting(disable_weight_init.Conv1d)
    Conv2d = _casting(disable_weight_init.Conv2d)
    Conv3d = _casting(disable_weight_init.Conv3d)
    GroupNorm = _casting(disable_weight_init.GroupNorm)
    LayerNorm = _casting(disable_weight_init.LayerNorm)
    RMSNorm = _casting(disable_weight_init.RMSNorm)
    ConvTranspose1d = _casting(disable_weight_init.ConvTranspose1d)
    ConvTranspose2d = _casting(disable_weight_init.ConvTranspose2d)
    Embedding = _casting(disable_weight_init.Embedding)


def pick_operations(weight_dtype: torch.dtype | None, compute_dtype: torch.dtype | None, **kwargs: Any) -> type:
    """manual_cast when weights are stored in another dtype than they run in, else disable_weight_init."""
    if compute_dtype is None or weight_dtype == compute_dtype:
        return disable_weight_init
    return manual_cast
