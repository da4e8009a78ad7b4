"""The ComfyUI face of Comfy Cluster: protocol server, graph formats, validation, engine, compat modules."""

from cluster.executor.providers import add_providers

# The ModelFns this layer's processes (and the executors they start) can run: the core models, and
# `pack_node`, which runs a custom node pack's node whole on an executor. Also declared as the entry-point
# group `comfy_cluster.modelfns` in pyproject.toml, for executors started on their own.
add_providers("nodes.modelfns", "comfy_bridge.packs.pack_node")
