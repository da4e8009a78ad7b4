"""`comfy.conds`: the wrappers ComfyUI puts around each model input of a cond (c_crossattn, c_concat, y, ...)
so that conds of one batch can be checked for and joined into one model call. Packs build them in
extra_conds / model_conds; these are the real classes: process_cond repeats to the batch (and crops the
noise-shaped ones to an area), can_concat / concat join several conds along the batch."""

from __future__ import annotations

import logging
import math
from typing import Any

import torch

from comfy_bridge.compat.comfy.utils import repeat_to_batch_size

log = logging.getLogger(__name__)


class CONDRegular:
    """A tensor input that is the same for every sample: repeated to the batch, joined with torch.cat."""

    def __init__(self, cond: Any) -> None:
        self.cond = cond

    def _copy_with(self, cond: Any) -> CONDRegular:
        return type(self)(cond)

    def process_cond(self, batch_size: int, **kwargs: Any) -> CONDRegular:
        return self._copy_with(repeat_to_batch_size(self.cond, batch_size))

    def can_concat(self, other: CONDRegular) -> bool:
        if self.cond.shape != other.cond.shape:
            return False
        if self.cond.device != other.cond.device:
            log.warning("conds on different devices (%s, %s): not concatenated", self.cond.device, other.cond.device)
            return False
        return True

    def concat(self, others: list[CONDRegular]) -> torch.Tensor:
        return torch.cat([self.cond] + [o.cond for o in others])

    def size(self) -> list[int]:
        return list(self.cond.size())


class CONDNoiseShape(CONDRegular):
    """Shaped like the latent (c_concat, masks): an area (sizes then offsets, one per spatial dim) crops it."""

    def process_cond(self, batch_size: int, area: Any = None, **kwargs: Any) -> CONDRegular:
        data = self.cond
        if area is not None:
            n = len(area) // 2
            for dim in range(n):
                data = data.narrow(dim + 2, area[n + dim], area[dim])
        return self._copy_with(repeat_to_batch_size(data, batch_size))


class CONDCrossAttn(CONDRegular):
    """Cross-attention context [B, tokens, dim]: conds whose token counts differ are joined by repeating each
    up to the least common multiple of the counts (at most 4x), which leaves attention's result unchanged."""

    MAX_REPEAT = 4

    def can_concat(self, other: CONDRegular) -> bool:
        a, b = self.cond.shape, other.cond.shape
        if a != b:
            if a[0] != b[0] or a[2] != b[2]:
                return False
            if math.lcm(a[1], b[1]) // min(a[1], b[1]) > self.MAX_REPEAT:
                return False
        if self.cond.device != other.cond.device:
            log.warning("conds on different devices (%s, %s): not concatenated", self.cond.device, other.cond.device)
            return False
        return True

    def concat(self, others: list[CONDRegular]) -> torch.Tensor:
        conds = [self.cond] + [o.cond for o in others]
        tokens = math.lcm(*(c.shape[1] for c in conds))
        return torch.cat([c.repeat(1, tokens // c.shape[1], 1) if c.shape[1] < tokens else c for c in conds])


class CONDConstant(CONDRegular):
    """A non-tensor value (a number, a string): never batched; only equal constants join."""

    def process_cond(self, batch_size: int, **kwargs: Any) -> CONDRegular:
        return self._copy_with(self.cond)

    def can_concat(self, other: CONDRegular) -> bool:
        return bool(self.cond == other.cond)

    def concat(self, others: list[CONDRegular]) -> Any:
        return self.cond

    def size(self) -> list[int]:
        return [1]


class CONDList(CONDRegular):
    """A list of tensors, each repeated to the batch and joined position by position."""

    def process_cond(self, batch_size: int, **kwargs: Any) -> CONDRegular:
        return self._copy_with([repeat_to_batch_size(c, batch_size) for c in self.cond])

    def can_concat(self, other: CONDRegular) -> bool:
        return len(self.cond) == len(other.cond) and all(a.shape == b.shape for a, b in zip(self.cond, other.cond))

    def concat(self, others: list[CONDRegular]) -> list[torch.Tensor]:
        return [torch.cat([c] + [o.cond[i] for o in others]) for i, c in enumerate(self.cond)]

    def size(self) -> list[int]:
        # ComfyUI's memory estimate: all elements as one [1, width, n / width] tensor, width being the second
        # dimension of the last element (1 when it has none).
        total = sum(math.prod(c.size()) for c in self.cond)
        width = self.cond[-1].size()[1] if self.cond and self.cond[-1].dim() > 1 else 1
        return [1, width, total // width]


__all__ = ["CONDRegular", "CONDNoiseShape", "CONDCrossAttn", "CONDConstant", "CONDList"]
