"""`comfy.text_encoders`: ComfyUI's text encoder modules (the parts packs import)."""
