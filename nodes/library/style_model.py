"""ComfyUI's StyleModelLoader and StyleModelApply (nodes.py): T2I-Adapter style models (SD1.x) and Flux
Redux. The style model runs as the `style_model_cond` ModelFn on the CLIP vision output's last hidden
state; its tokens are appended to every conditioning entry here, as ComfyUI appends them.

strength_type "multiply" scales the tokens. "attn_bias" leaves them and, unless the strength is 1, records
ComfyUI's attention bias (log strength on the new tokens) as the entry's attention_mask. SD-family models
ignore that mask, in ComfyUI as here, so SD1 results are ComfyUI's; the Flux model here does not read
attention masks, so a Redux model with an attention bias is refused rather than silently ignored."""

from __future__ import annotations

import torch

from cluster.refs import ModelRef
from nodes.inputs import require_ref
from nodes.ksampler import call_model_fn
from nodes.library.clip_vision import ClipVisionOutput
from nodes.loaders import make_ref, model_file
from nodes.workspace import active

COMPONENT = "style_model"


def attention_bias(keys: dict, n_txt: int, batch: int, n_new: int, bias: torch.Tensor) -> dict:
    """ComfyUI's attention mask grown by `n_new` style tokens after the text tokens: the old mask keeps its
    four blocks around the new rows/columns (image tokens of a reference size sit after them), and every
    query attends to the new tokens with `bias`."""
    ref_size = keys.get("attention_mask_img_shape", (1, 1))
    n_ref = ref_size[0] * ref_size[1]
    mask = keys.get("attention_mask")
    if mask is None:
        mask = torch.zeros((batch, n_txt + n_ref, n_txt + n_ref), dtype=torch.float16)
    if mask.dtype == torch.bool:  # allowed/forbidden -> 0 / -inf bias
        mask = torch.log(mask.to(dtype=torch.float16))
    size = n_txt + n_new + n_ref
    out = torch.zeros((batch, size, size), dtype=torch.float16)
    out[:, :n_txt, :n_txt] = mask[:, :n_txt, :n_txt]
    out[:, :n_txt, n_txt + n_new :] = mask[:, :n_txt, n_txt:]
    out[:, n_txt + n_new :, :n_txt] = mask[:, n_txt:, :n_txt]
    out[:, n_txt + n_new :, n_txt + n_new :] = mask[:, n_txt:, n_txt:]
    out[:, :n_txt, n_txt : n_txt + n_new] = bias
    out[:, n_txt + n_new :, n_txt : n_txt + n_new] = bias
    return {**keys, "attention_mask": out, "attention_mask_img_shape": ref_size}


class StyleModelLoader:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "style_model_name": (
                    active().list_files("style_models"),
                    {"tooltip": "The style model file (T2I-Adapter style or Flux Redux)."},
                )
            }
        }

    RETURN_TYPES = ("STYLE_MODEL",)
    FUNCTION = "load_style_model"
    CATEGORY = "loaders"
    DESCRIPTION = "Loads a style model (T2I-Adapter style, Flux Redux) from models/style_models."

    def load_style_model(self, style_model_name: str) -> tuple[ModelRef]:
        from nodes.models.errors import ModelLoadError
        from nodes.models.safetensors_io import shapes_of
        from nodes.models.style_model import style_kind

        path = model_file("style_models", style_model_name, "style_model_name")
        try:
            kind = style_kind(shapes_of(path)[0])
        except ModelLoadError as e:
            raise ValueError(f"style_model_name: {e}") from e
        if kind is None:
            raise ValueError(
                f"style_model_name: invalid style model {style_model_name!r} (neither a T2I-Adapter "
                "style model nor Flux Redux)"
            )
        return (make_ref(COMPONENT, kind, [path]),)


class StyleModelApply:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "conditioning": ("CONDITIONING", {"tooltip": "The conditioning the style tokens are appended to."}),
                "style_model": ("STYLE_MODEL", {"tooltip": "The style model."}),
                "clip_vision_output": ("CLIP_VISION_OUTPUT", {"tooltip": "The encoded reference image."}),
                "strength": (
                    "FLOAT",
                    {
                        "default": 1.0,
                        "min": 0.0,
                        "max": 10.0,
                        "step": 0.001,
                        "tooltip": "How strongly the style tokens act.",
                    },
                ),
                "strength_type": (
                    ["multiply", "attn_bias"],
                    {
                        "tooltip": "multiply: scale the style tokens; attn_bias: "
                        "bias attention towards them by log(strength)."
                    },
                ),
            }
        }

    RETURN_TYPES = ("CONDITIONING",)
    FUNCTION = "apply_stylemodel"
    CATEGORY = "conditioning/style_model"
    DESCRIPTION = "Appends a style model's tokens for a reference image to the conditioning."

    async def apply_stylemodel(
        self,
        conditioning: list,
        style_model: ModelRef,
        clip_vision_output: ClipVisionOutput,
        strength: float,
        strength_type: str,
    ) -> tuple[list]:
        require_ref(style_model, COMPONENT, "style_model", "STYLE_MODEL")
        biased = strength_type == "attn_bias" and strength != 1.0
        if style_model.arch == "flux_redux" and (biased or any("attention_mask" in k for _, k in conditioning)):
            raise ValueError(
                "strength_type: an attention bias on a Flux Redux style model is not supported yet "
                "(the Flux model here does not read attention masks); use multiply"
            )
        out = await call_model_fn(
            "style_model_cond",
            style_model,
            "style_model",
            {"last_hidden_state": clip_vision_output["last_hidden_state"]},
            {},
        )
        cond = out["cond"].flatten(start_dim=0, end_dim=1).unsqueeze(dim=0)
        if strength_type == "multiply":
            cond = cond * strength
        bias = torch.log(torch.Tensor([strength if strength_type == "attn_bias" else 1.0]))
        result = []
        for txt, keys in conditioning:
            if "attention_mask" in keys or biased:
                keys = attention_bias(keys, txt.shape[1], txt.shape[0], cond.shape[1], bias)
            result.append([torch.cat((txt, cond.to(txt.device)), dim=1), dict(keys)])
        return (result,)


NODE_CLASS_MAPPINGS = {"StyleModelLoader": StyleModelLoader, "StyleModelApply": StyleModelApply}
NODE_DISPLAY_NAME_MAPPINGS = {"StyleModelLoader": "Load Style Model", "StyleModelApply": "Apply Style Model"}
