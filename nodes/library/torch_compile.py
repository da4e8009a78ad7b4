"""ComfyUI's comfy_extras.nodes_torch_compile: TorchCompileModel. The MODEL carries the backend as data
(nodes.modelfns.model_options.COMPILE); each executor's denoise step compiles the network it has loaded once
per (network, backend) with torch.compile and reuses it for every later step (nodes.modelfns.denoise)."""

from __future__ import annotations

from typing import Any

from cluster.refs import ModelRef
from nodes.inputs import require_model
from nodes.modelfns.model_options import COMPILE

BACKENDS = ["inductor", "cudagraphs"]  # ComfyUI's choices


class TorchCompileModel:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_torch_compile"
    RETURN_TYPES = ("MODEL",)
    FUNCTION = "patch"
    CATEGORY = "_for_testing"
    EXPERIMENTAL = True
    DESCRIPTION = (
        "Runs the diffusion model compiled with torch.compile (compiled once on each executor, on "
        "first use; the first steps take longer)."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL", {}), "backend": ("COMBO", {"multiselect": False, "options": BACKENDS})}}

    def patch(self, model: Any, backend: str) -> tuple[ModelRef]:
        if backend not in BACKENDS:
            raise ValueError(f"backend: expected one of {BACKENDS}, got {backend!r}")
        # A later TorchCompileModel replaces the earlier backend, as ComfyUI's wrapper does.
        return (require_model(model).with_option(COMPILE, backend),)


NODE_CLASS_MAPPINGS = {"TorchCompileModel": TorchCompileModel}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
