"""`comfy.ldm.cosmos.predict2` (Cosmos Predict2's MiniTrainDIT, the base of newer ComfyUI's Anima): the classes
packs check blocks against (comfyui-tooling-nodes finds the attention layers of an Anima model by isinstance).
Building one raises UnsupportedFeature: models run on the executors, not from these classes."""

from __future__ import annotations

from comfy_bridge.compat.comfy.ldm.model_classes import UnsupportedModel


class Attention(UnsupportedModel):
    pass


class Block(UnsupportedModel):
    pass


class MiniTrainDIT(UnsupportedModel):
    pass
