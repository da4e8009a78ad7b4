"""ComfyUI's core nodes on torch + diffusers, importable as `nodes` like ComfyUI's nodes.py."""
