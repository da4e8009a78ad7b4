"""A pack that imports the model-side surface the way real packs do (IPAdapter, previews, LoRA and
layer-building packs): server.BinaryEventTypes, latent_preview's previewers, comfy.latent_formats,
comfy.ops, comfy.diffusers_convert, comfy.lora and comfy.clip_vision."""

import comfy.clip_vision
import comfy.diffusers_convert  # noqa: F401  (imported, never used: must still load)
import comfy.latent_formats
import comfy.lora  # noqa: F401
import comfy.ops
import latent_preview
import numpy as np
import torch
from comfy.clip_vision import clip_preprocess  # noqa: F401
from comfy.latent_formats import SDXL, Wan21  # noqa: F401  (Wan21: a family we do not run, imported only)
from latent_preview import TAESD, Latent2RGBPreviewer, TAESDPreviewerImpl  # noqa: F401
from server import BinaryEventTypes, PromptServer

ops = comfy.ops.manual_cast


class LatentRGB:
    """The latent through ComfyUI's SD1.5 RGB factors, as an IMAGE; announces itself as text."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"samples": ("LATENT",)}}

    RETURN_TYPES = ("IMAGE",)
    OUTPUT_NODE = True
    FUNCTION = "run"
    CATEGORY = "surface_models_pack"

    def run(self, samples):
        fmt = comfy.latent_formats.SD15()
        previewer = Latent2RGBPreviewer(fmt.latent_rgb_factors)
        preview = previewer.decode_latent_to_preview(fmt.process_in(samples["samples"]))
        PromptServer.instance.send_sync(BinaryEventTypes.TEXT, {"text": "rgb", "node_id": "x"})
        return (torch.from_numpy(np.asarray(preview).astype(np.float32) / 255.0)[None],)


class ProjectLatent:
    """A layer the pack builds from comfy.ops (no init), with weights it sets: channel 0 copied."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"samples": ("LATENT",)}}

    RETURN_TYPES = ("LATENT",)
    FUNCTION = "run"
    CATEGORY = "surface_models_pack"

    def run(self, samples):
        conv = ops.Conv2d(4, 4, 1, dtype=torch.float16)
        conv.weight.data = torch.zeros(4, 4, 1, 1, dtype=torch.float16)
        conv.weight.data[:, 0] = 1.0
        conv.bias.data = torch.zeros(4, dtype=torch.float16)
        return ({"samples": conv(samples["samples"])},)


NODE_CLASS_MAPPINGS = {"SurfaceLatentRGB": LatentRGB, "SurfaceProjectLatent": ProjectLatent}
