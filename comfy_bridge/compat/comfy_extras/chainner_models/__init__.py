"""`comfy_extras.chainner_models`: ComfyUI's deprecated upscale-model loading module (now spandrel)."""
