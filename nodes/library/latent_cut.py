"""Today's ComfyUI Latent Cut to Batch (`comfy_extras.nodes_latent`, added after 0.3.64): cuts a latent along
time, width or height into equal slices and stacks them as a batch."""

from __future__ import annotations

from nodes import MAX_RESOLUTION

AXES = {"x": 1, "y": 2, "t": 3}  # counted from the last axis: x is the width, y the height, t the frames


def cut_to_batch(samples: dict, dim: str, slice_size: int) -> dict:
    latent = samples["samples"]
    if dim not in AXES:
        raise ValueError(f"Latent Cut to Batch: unknown dim {dim!r} (t, x or y)")
    axis = latent.ndim - AXES[dim]
    if axis < 2:  # an image latent has no time axis: nothing to cut
        return samples
    moved = latent.movedim(axis, 1)
    size = min(slice_size, moved.shape[1])
    moved = moved[:, : moved.shape[1] // size * size]  # a rest shorter than a slice is dropped
    return {**samples, "samples": moved.reshape(-1, size, *moved.shape[2:]).movedim(1, axis)}


class LatentCutToBatch:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_latent"
    FUNCTION = "execute"
    CATEGORY = "latent/advanced"

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "samples": ("LATENT", {}),
                "dim": ("COMBO", {"multiselect": False, "options": ["t", "x", "y"]}),
                "slice_size": ("INT", {"default": 1, "min": 1, "max": MAX_RESOLUTION, "step": 1}),
            }
        }

    RETURN_TYPES = ("LATENT",)
    OUTPUT_TOOLTIPS = (None,)
    SEARCH_ALIASES = ["slice to batch", "split latent", "tile latent", "chunk latent"]
    DESCRIPTION = "Cuts the latent along t (frames), x or y into slices of slice_size and stacks them as a batch."

    def execute(self, samples: dict, dim: str, slice_size: int):
        return (cut_to_batch(samples, dim, slice_size),)


NODE_CLASS_MAPPINGS = {"LatentCutToBatch": LatentCutToBatch}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
