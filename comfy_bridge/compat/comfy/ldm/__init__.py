"""`comfy.ldm`: the model-building modules of ComfyUI that packs import (functions real, model classes by name)."""
