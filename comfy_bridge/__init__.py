"""The ComfyUI face of Comfy Cluster: protocol server, graph formats, validation, engine, compat modules."""
