"""HunyuanDiT (issue 38) is not supported yet: its Chinese CLIP BERT tokenizer (47,020 entries) has no permissively
licensed source here. A HunyuanDiT file, detected by ComfyUI 0.3.64's model_detection key (`mlp_t5.0.weight`),
bare or in a checkpoint, is refused by name rather than as an unknown architecture."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("prefix", ["", "model.diffusion_model."])
def test_hunyuan_dit_is_refused_by_name(prefix: str) -> None:
    from nodes.models.detect import classify
    from nodes.models.errors import ModelLoadError

    shapes = {f"{prefix}mlp_t5.0.weight": (8192, 2048), f"{prefix}x_embedder.proj.weight": (1408, 4, 2, 2)}
    with pytest.raises(ModelLoadError, match="is a HunyuanDiT model, which is not supported yet"):
        classify(shapes, "hunyuan_dit_1.2.safetensors")
