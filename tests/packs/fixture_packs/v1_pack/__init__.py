"""A V1 pack: NODE_CLASS_MAPPINGS, display names, a web extension, an HTTP route, progress and custom
websocket events, and a node that reports the process it ran in."""

import os

import comfy.utils
from aiohttp import web
from server import PromptServer

from .nodes import V1Invert, V1ListsFromInputTypes

PRESTARTUP_SEEN = os.environ.get("V1_PACK_PRESTARTUP")
WEB_DIRECTORY = "./js"


STARTED = []


async def on_startup(app):
    STARTED.append(True)


PromptServer.instance.app.on_startup.append(on_startup)  # comfyui-deploy does this at import


@PromptServer.instance.routes.get("/v1_pack/hello")
async def hello(request):
    return web.json_response({"hello": "v1_pack", "prestartup": PRESTARTUP_SEEN})


class V1Progress:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {"image": ("IMAGE",), "steps": ("INT", {"default": 3, "min": 1, "max": 10})},
            "hidden": {"unique_id": "UNIQUE_ID"},
        }

    RETURN_TYPES = ("IMAGE", "STRING")
    RETURN_NAMES = ("image", "pid")
    FUNCTION = "run"
    CATEGORY = "v1_pack"

    def run(self, image, steps, unique_id=None):
        bar = comfy.utils.ProgressBar(steps)
        for _ in range(steps):
            bar.update(1)
        PromptServer.instance.send_sync("v1_pack.done", {"node": unique_id, "steps": steps, "sum": float(image.sum())})
        return (image * 0.5, str(os.getpid()))


class V1ShowText:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"text": ("STRING", {"forceInput": True})}}

    RETURN_TYPES = ()
    OUTPUT_NODE = True
    FUNCTION = "show"
    CATEGORY = "v1_pack"

    def show(self, text):
        return {"ui": {"text": [text]}}


class V1SaveImage:
    """Saves its image itself into the output folder, as pack save nodes do, and names it in its UI result."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image": ("IMAGE",)}}

    RETURN_TYPES = ()
    OUTPUT_NODE = True
    FUNCTION = "save"
    CATEGORY = "v1_pack"

    def save(self, image):
        import folder_paths
        import numpy as np
        from PIL import Image

        folder = os.path.join(folder_paths.get_output_directory(), "v1_pack")
        os.makedirs(folder, exist_ok=True)
        name = f"v1_save_{os.getpid()}_{len(os.listdir(folder))}.png"
        Image.fromarray((image[0].numpy() * 255).round().clip(0, 255).astype(np.uint8)).save(os.path.join(folder, name))
        return {"ui": {"images": [{"filename": name, "subfolder": "v1_pack", "type": "output"}]}}


NODE_CLASS_MAPPINGS = {
    "V1Invert": V1Invert,
    "V1Progress": V1Progress,
    "V1ShowText": V1ShowText,
    "V1SaveImage": V1SaveImage,
    "V1ListsFromInputTypes": V1ListsFromInputTypes,
    "KSampler": V1Invert,
}  # a pack cannot replace a core node
NODE_DISPLAY_NAME_MAPPINGS = {"V1Invert": "Invert (v1 pack)"}
