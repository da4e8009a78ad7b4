"""`comfy_execution`: graph helpers, executing context and progress as ComfyUI exposes them."""
