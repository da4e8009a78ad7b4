"""ComfyUI's GLIGENLoader and GLIGENTextBoxApply (nodes.py).

The loader names a GLIGEN file (a ModelRef); the text box node encodes its text with the CLIP (the pooled output,
unprojected as ComfyUI asks for it) and appends the box, in latent cells, to every entry's boxes. The denoising
step runs the GLIGEN layers for those entries (nodes/modelfns/gligen.py, nodes/models/gligen.py)."""

from __future__ import annotations

from cluster.refs import ModelRef
from nodes.conditioning import require
from nodes.inputs import require_component, require_ref
from nodes.ksampler import call_model_fn
from nodes.loaders import make_ref, model_file, model_files
from nodes.modelfns.hooks import encodings

COMPONENT = "gligen"
MAX_RESOLUTION = 16384


def _text_width(ref: ModelRef) -> int:
    from nodes.models.gligen import POSITION_MARKER
    from nodes.models.safetensors_io import shapes_of

    return shapes_of(ref.sources[0])[0][POSITION_MARKER][0]


class GLIGENLoader:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"gligen_name": (model_files("gligen"),)}}

    RETURN_TYPES = ("GLIGEN",)
    FUNCTION = "load_gligen"
    CATEGORY = "loaders"
    DESCRIPTION = "Loads a GLIGEN text-box model from models/gligen."

    def load_gligen(self, gligen_name: str) -> tuple[ModelRef]:
        from nodes.models.gligen import is_gligen
        from nodes.models.safetensors_io import shapes_of

        path = model_file("gligen", gligen_name, "gligen_name")
        if not is_gligen(shapes_of(path)[0]):
            raise ValueError(f"gligen_name: {gligen_name!r} is not a GLIGEN model (no position_net and fuser layers)")
        return (make_ref(COMPONENT, "gligen", [path]),)


class GLIGENTextBoxApply:
    @classmethod
    def INPUT_TYPES(cls):
        step8 = {"min": 8, "max": MAX_RESOLUTION, "step": 8}
        return {
            "required": {
                "conditioning_to": ("CONDITIONING",),
                "clip": ("CLIP",),
                "gligen_textbox_model": ("GLIGEN",),
                "text": ("STRING", {"multiline": True, "dynamicPrompts": True}),
                "width": ("INT", {"default": 64, **step8}),
                "height": ("INT", {"default": 64, **step8}),
                "x": ("INT", {"default": 0, "min": 0, "max": MAX_RESOLUTION, "step": 8}),
                "y": ("INT", {"default": 0, "min": 0, "max": MAX_RESOLUTION, "step": 8}),
            }
        }

    RETURN_TYPES = ("CONDITIONING",)
    FUNCTION = "append"
    CATEGORY = "conditioning/gligen"
    DESCRIPTION = "Places a text in a box of the image (in pixels) for a GLIGEN model to draw there."

    async def append(self, conditioning_to, clip, gligen_textbox_model, text: str, width, height, x, y):
        conditioning_to = require(conditioning_to, "conditioning_to")
        clip = require_component(clip, "text_encoder", "clip")
        require_ref(gligen_textbox_model, COMPONENT, "gligen_textbox_model", "GLIGEN")
        ref, _ = encodings(clip)[0]
        out = await call_model_fn("text_encode", ref, "clip", {}, {"text": text})
        pooled = out.get("pooled")
        width_needed = _text_width(gligen_textbox_model)
        if pooled is None or pooled.shape[-1] != width_needed:
            got = "none" if pooled is None else f"{pooled.shape[-1]} wide"
            raise ValueError(
                f"clip: this GLIGEN model takes {width_needed}-wide pooled text embeddings, the CLIP gives {got} "
                "(use the text encoder of the checkpoint it was trained for)"
            )
        box = [height // 8, width // 8, y // 8, x // 8]
        conditioning = []
        for cond, opts in conditioning_to:
            earlier = opts.get("gligen") or {"ref": gligen_textbox_model, "boxes": [], "pooled": []}
            spec = {
                "ref": gligen_textbox_model,  # the last node's model serves all boxes, as in ComfyUI
                "boxes": [*earlier["boxes"], box],
                "pooled": [*earlier["pooled"], pooled[:1]],
            }
            conditioning.append([cond, {**opts, "gligen": spec}])
        return (conditioning,)


NODE_CLASS_MAPPINGS = {"GLIGENLoader": GLIGENLoader, "GLIGENTextBoxApply": GLIGENTextBoxApply}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
