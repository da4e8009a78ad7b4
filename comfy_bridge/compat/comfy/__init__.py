"""ComfyUI-compatible `comfy` package (only the parts node packs use)."""
