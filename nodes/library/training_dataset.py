"""ComfyUI's encoded training datasets (`comfy_extras.nodes_dataset`, in ComfyUI 0.10.0): Make Training Dataset
encodes a list of images with a VAE and their captions with a text encoder (as VAE Encode and CLIP Text Encode
do); Save Training Dataset writes the latent and conditioning lists into a folder of the output directory as
`shard_NNNN.pkl` files (torch.save of {"latents": [...], "conditioning": [...]}) with a metadata.json; Load
Training Dataset reads such a folder back, in shard order. The files are ComfyUI's: either side reads the other's.

Loading unpickles with torch.load's weights_only (tensors, lists, dicts, numbers, strings), as ComfyUI does on
this torch, so a shard cannot run code."""

from __future__ import annotations

import json
import os

import torch

from nodes.model_nodes import CLIPTextEncode, VAEEncode
from nodes.workspace import active

MODULE = "comfy_extras.nodes_dataset"
CATEGORY = "dataset"


def dataset_folder(folder_name: str) -> str:
    """The folder inside the output directory; a name that leaves it is refused."""
    base = os.path.abspath(active().output_dir)
    folder = os.path.abspath(os.path.join(base, folder_name))
    if folder == base or os.path.commonpath((base, folder)) != base:
        raise ValueError(
            f"Training dataset: folder_name {folder_name!r} must name a folder inside the output directory"
        )
    return folder


class MakeTrainingDataset:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = CATEGORY
    EXPERIMENTAL = True
    INPUT_IS_LIST = True
    SEARCH_ALIASES = ["encode dataset"]

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "images": ("IMAGE", {"tooltip": "The images to encode."}),
                "vae": ("VAE", {"tooltip": "Encodes the images into latents."}),
                "clip": ("CLIP", {"tooltip": "Encodes the captions into conditioning."}),
            },
            "optional": {
                "texts": (
                    "STRING",
                    {"multiline": False, "tooltip": "One caption per image, one for all, or none (an empty caption)."},
                )
            },
        }

    RETURN_TYPES = ("LATENT", "CONDITIONING")
    RETURN_NAMES = ("latents", "conditioning")
    OUTPUT_IS_LIST = (True, True)
    OUTPUT_TOOLTIPS = ("One latent per image.", "One conditioning per caption.")
    DESCRIPTION = "Encodes images with a VAE and their captions with a text encoder: a training dataset."

    async def execute(self, images: list, vae: list, clip: list, texts: list | None = None):
        texts = list(texts) if texts else [""]
        if len(texts) == 1 and len(images) > 1:
            texts = texts * len(images)
        elif len(texts) != len(images):
            raise ValueError(
                f"Make Training Dataset: {len(texts)} texts for {len(images)} images; give one text "
                f"per image, one for all, or none"
            )
        latents = [(await VAEEncode().encode(vae[0], image))[0] for image in images]
        conditioning = [(await CLIPTextEncode().encode(clip[0], text))[0] for text in texts]
        return latents, conditioning


class SaveTrainingDataset:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = CATEGORY
    EXPERIMENTAL = True
    OUTPUT_NODE = True
    INPUT_IS_LIST = True
    SEARCH_ALIASES = ["export training data"]

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "latents": ("LATENT", {"tooltip": "The latents of Make Training Dataset."}),
                "conditioning": ("CONDITIONING", {"tooltip": "The conditioning of Make Training Dataset."}),
                "folder_name": (
                    "STRING",
                    {
                        "default": "training_dataset",
                        "multiline": False,
                        "tooltip": "The folder to write, inside the output directory.",
                    },
                ),
                "shard_size": ("INT", {"default": 1000, "min": 1, "max": 100000, "tooltip": "Samples per shard file."}),
            },
            "hidden": {"prompt": ("PROMPT",), "extra_pnginfo": ("EXTRA_PNGINFO",)},
        }

    RETURN_TYPES = ()
    OUTPUT_TOOLTIPS = ()
    DESCRIPTION = "Writes a training dataset (latents and conditioning) into a folder of the output directory."

    def execute(self, latents: list, conditioning: list, folder_name: list[str], shard_size: list[int], **hidden: list):
        if len(latents) != len(conditioning):
            raise ValueError(
                f"Save Training Dataset: {len(latents)} latents but {len(conditioning)} conditionings; "
                f"each sample needs both"
            )
        folder, size = dataset_folder(folder_name[0]), shard_size[0]
        os.makedirs(folder, exist_ok=True)
        shards = (len(latents) + size - 1) // size
        for index in range(shards):
            part = slice(index * size, (index + 1) * size)
            with open(os.path.join(folder, f"shard_{index:04d}.pkl"), "wb") as f:
                torch.save({"latents": latents[part], "conditioning": conditioning[part]}, f)
        with open(os.path.join(folder, "metadata.json"), "w") as f:
            json.dump({"num_samples": len(latents), "num_shards": shards, "shard_size": size}, f, indent=2)
        return ()


class LoadTrainingDataset:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = CATEGORY
    EXPERIMENTAL = True
    SEARCH_ALIASES = ["import dataset", "training data"]

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "folder_name": (
                    "STRING",
                    {
                        "default": "training_dataset",
                        "multiline": False,
                        "tooltip": "The dataset's folder, inside the output directory.",
                    },
                )
            }
        }

    RETURN_TYPES = ("LATENT", "CONDITIONING")
    RETURN_NAMES = ("latents", "conditioning")
    OUTPUT_IS_LIST = (True, True)
    OUTPUT_TOOLTIPS = ("One latent per sample.", "One conditioning per sample.")
    DESCRIPTION = "Reads a training dataset written by Save Training Dataset."

    def execute(self, folder_name: str):
        folder = dataset_folder(folder_name)
        if not os.path.isdir(folder):
            raise ValueError(f"Load Training Dataset: no dataset folder {folder_name!r} in the output directory")
        shards = sorted(f for f in os.listdir(folder) if f.startswith("shard_") and f.endswith(".pkl"))
        if not shards:
            raise ValueError(f"Load Training Dataset: the folder {folder_name!r} holds no shard_*.pkl file")
        latents: list = []
        conditioning: list = []
        for shard in shards:
            with open(os.path.join(folder, shard), "rb") as f:
                data = torch.load(f, weights_only=True)
            latents += data["latents"]
            conditioning += data["conditioning"]
        return latents, conditioning


NODE_CLASS_MAPPINGS = {
    "MakeTrainingDataset": MakeTrainingDataset,
    "SaveTrainingDataset": SaveTrainingDataset,
    "LoadTrainingDataset": LoadTrainingDataset,
}
NODE_DISPLAY_NAME_MAPPINGS = {
    "MakeTrainingDataset": "Make Training Dataset",
    "SaveTrainingDataset": "Save Training Dataset",
    "LoadTrainingDataset": "Load Training Dataset",
}
