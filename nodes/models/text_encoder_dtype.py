"""The one rule for the dtype a text encoder computes in, whatever its file holds (bf16, fp16, float32).

ComfyUI (0.3.64, commit a125cd84, and 0.10.0 alike) computes every text encoder in float32: comfy/sd1_clip.py's
SDClipModel embeds the tokens with out_dtype=torch.float32 and calls its transformer with dtype=torch.float32, and its
layers are comfy.ops.manual_cast ones, which cast each weight to the input's dtype when used. The weights are held in
model_management.text_encoder_dtype(device) (float16 on the CPU and on CUDA without --fp32-text-enc), or in the
file's dtype where the family's loader detects it (comfy/sd.py's llama_detect / t5xxl_detect: Qwen, Llama, T5-XXL
files), but the arithmetic is float32: a bf16 or fp16 file gives the conditioning float32 arithmetic gives on its
values. Measured on the CPU by scripts/record_comfyui_text_encoder_dtypes.py
(tests/models/test_text_encoder_dtypes.py).

Every text-encoder loader builds its module in this dtype, so that the file's dtype never decides the arithmetic."""

from __future__ import annotations

import torch

TEXT_ENCODER_COMPUTE_DTYPE = torch.float32


def text_encoder_compute_dtype(file_dtype: torch.dtype | None = None) -> torch.dtype:
    """The dtype a text encoder whose file holds `file_dtype` weights computes in: float32 for every float dtype
    (see the module docstring). `file_dtype` is taken so that callers say what they read; it does not change the
    answer."""
    return TEXT_ENCODER_COMPUTE_DTYPE
