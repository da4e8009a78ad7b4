"""`comfy.ldm.qwen_image`: Qwen-Image helpers (apply_rotary_emb)."""
