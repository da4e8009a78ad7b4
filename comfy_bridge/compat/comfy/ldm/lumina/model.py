"""`comfy.ldm.lumina.model` (Lumina 2 / NextDiT, also Z-Image): the classes packs subclass or check
(building one raises UnsupportedFeature: the model runs on the executors, not from these classes)."""

from __future__ import annotations

from comfy_bridge.compat.comfy.ldm.model_classes import UnsupportedModel


class FeedForward(UnsupportedModel):
    pass


class JointAttention(UnsupportedModel):
    pass


class JointTransformerBlock(UnsupportedModel):
    pass


class NextDiT(UnsupportedModel):
    pass
