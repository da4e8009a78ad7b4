"""`comfy.sd3_clip`: where ComfyUI kept the SD3 text encoder classes before comfy.text_encoders.sd3_clip
(ComfyUI 0.3.64 no longer has this module; packs import it as a fallback). The same classes."""

from comfy_bridge.compat.comfy.text_encoders.sd3_clip import (  # noqa: F401
    SD3ClipModel,
    SD3Tokenizer,
    T5XXLModel,
    T5XXLTokenizer,
    sd3_clip,
    t5_xxl_detect,
)

__all__ = ["SD3ClipModel", "SD3Tokenizer", "T5XXLModel", "T5XXLTokenizer", "sd3_clip", "t5_xxl_detect"]
