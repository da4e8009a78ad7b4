"""ComfyUI's comfy_extras.nodes_edit_model: ReferenceLatent, reference images for edit models. Our Flux model
reads them as Flux Kontext does (nodes.models.flux.reference_tokens); FluxKontextMultiReferenceLatentMethod
(nodes.library.flux) chooses how several are placed."""

from __future__ import annotations

from typing import Any

from nodes.conditioning import require


class ReferenceLatent:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_edit_model"
    RETURN_TYPES = ("CONDITIONING",)
    FUNCTION = "execute"
    CATEGORY = "advanced/conditioning/edit_models"
    DESCRIPTION = (
        "Adds a latent as a reference image to the conditioning, for edit models such as Flux "
        "Kontext; chain several for several references."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {"conditioning": ("CONDITIONING", {})},
            "optional": {
                "latent": ("LATENT", {"tooltip": "The reference; without one the conditioning is passed on unchanged."})
            },
        }

    def execute(self, conditioning: list, latent: dict[str, Any] | None = None) -> tuple[list]:
        conditioning = require(conditioning, "conditioning")
        if latent is None:
            return (conditioning,)
        # Appended after the references the entry already has, as ComfyUI's conditioning_set_values(append=True).
        return (
            [
                [cond, {**opts, "reference_latents": list(opts.get("reference_latents") or []) + [latent["samples"]]}]
                for cond, opts in conditioning
            ],
        )


NODE_CLASS_MAPPINGS = {"ReferenceLatent": ReferenceLatent}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
