"""ComfyUI's node families beyond nodes.py, one module each (masks, images, latents, primitives, custom
sampling, ...). `nodes` loads every module here; `comfy_extras.nodes_*` re-export them for node packs."""
