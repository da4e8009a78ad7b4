"""BlockSparseAttention (today's ComfyUI comfy_extras.nodes_sparse_attention, newest source; "Model Sparse
Attention"): block-sparse attention through comfy_kitchen's CUDA kernels. ComfyUI keeps every call dense where
the kernel cannot run (not on CUDA, no compiled kernel; MiniMax H3 blocks also need bfloat16 on CUDA), so on the
CPUs this backend runs on its output is the dense model's: the MODEL passes through unchanged. As in ComfyUI, the
vsa method is refused for a model other than MiniMax H3."""

from __future__ import annotations

from typing import Any

from nodes.dynamic_inputs import DynamicSection, dynamic_combo
from nodes.inputs import require_model

_KEEP = ("FLOAT", {"default": 10.0, "min": 0.5, "max": 95.0, "step": 0.5})
METHOD = dynamic_combo(
    {
        "sol-attn": {"tau": ("FLOAT", {"default": 1.3, "min": 0.0, "max": 4.0, "step": 0.05})},
        "sla": {"keep_percent": _KEEP},
        "vsa": {"keep_percent": _KEEP},
    },
    display_name="method",
)


class BlockSparseAttention:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_sparse_attention"
    FUNCTION = "execute"
    CATEGORY = "model/patch"
    RETURN_TYPES = ("MODEL",)
    RETURN_NAMES = ("model",)
    EXPERIMENTAL = True
    SEARCH_ALIASES = ["Block Sparse Attention"]
    DESCRIPTION = (
        "Applies block-sparse attention to eligible model attention layers (CUDA kernels); on this "
        "backend's CPUs every call stays dense, as in ComfyUI, so the model is unchanged."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": DynamicSection(
                {
                    "model": ("MODEL", {}),
                    "selection": METHOD,
                    "start_percent": ("FLOAT", {"default": 0.2, "min": 0.0, "max": 1.0, "step": 0.01}),
                    "end_percent": ("FLOAT", {"default": 1.0, "min": 0.0, "max": 1.0, "step": 0.01}),
                    "dense_blocks": ("STRING", {"default": "", "advanced": True, "multiline": False}),
                    "min_tokens": ("INT", {"default": 12288, "min": 0, "max": 1 << 20, "step": 512, "advanced": True}),
                    "extra_tokens": ("INT", {"default": 256, "min": 0, "max": 256, "step": 64, "advanced": True}),
                    "sink_conditioning": (
                        "COMBO",
                        {
                            "multiselect": False,
                            "options": ["exact_kv", "exact_kv_and_rows", "off"],
                            "default": "exact_kv_and_rows",
                            "advanced": True,
                        },
                    ),
                    "verbose": ("BOOLEAN", {"default": False, "advanced": True}),
                }
            )
        }

    def execute(self, model, selection: str, start_percent: float, end_percent: float, **kwargs: Any):
        model = require_model(model)
        if selection == "vsa" and model.arch != "minimax_h3":
            raise ValueError("selection: VSA selection needs a MiniMax-H3 model")
        return (model,)


NODE_CLASS_MAPPINGS = {"BlockSparseAttention": BlockSparseAttention}
NODE_DISPLAY_NAME_MAPPINGS = {"BlockSparseAttention": "Model Sparse Attention"}
