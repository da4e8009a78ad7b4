"""The guider classes of ComfyUI's comfy_extras that packs subclass: Guider_Basic (positive only) and
Guider_PerpNeg (positive, negative and an empty prompt). They keep their conds and settings like
ComfyUI's; sampling with them goes through CFGGuider.sample, which this backend refuses (its guiders are
built by the GUIDER nodes, BasicGuider and PerpNegGuider, and run as denoise steps on the executors)."""

from __future__ import annotations

from typing import Any

from comfy_bridge.compat.comfy.samplers import CFGGuider
from comfy_bridge.compat.node_helpers import conditioning_set_values


class Guider_Basic(CFGGuider):
    def set_conds(self, positive: Any) -> None:
        self.inner_set_conds({"positive": positive})


class Guider_PerpNeg(CFGGuider):
    neg_scale = 1.0

    def set_conds(self, positive: Any, negative: Any, empty_negative_prompt: Any) -> None:
        # The empty prompt is marked negative, as ComfyUI does (hooks and models read prompt_type).
        empty = conditioning_set_values(empty_negative_prompt, {"prompt_type": "negative"})
        self.inner_set_conds({"positive": positive, "empty_negative_prompt": empty, "negative": negative})

    def set_cfg(self, cfg: float, neg_scale: float) -> None:
        self.cfg, self.neg_scale = cfg, neg_scale
