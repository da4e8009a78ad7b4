"""`comfy.diffusers_load`: ComfyUI's loader of a diffusers pipeline folder (unet/, vae/, text_encoder/ and
text_encoder_2/ beside a model_index.json), as its DiffusersLoader node uses it. Here the folder becomes MODEL /
CLIP / VAE proxies of this backend (refs to the folder that executors load), as nodes' DiffusersLoader returns."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from comfy_bridge.packs.proxies import wrap


def first_file(path: str, filenames: list[str]) -> str | None:
    """The first of `filenames` that exists in the folder `path`, or None (ComfyUI's helper)."""
    return next((p for p in (os.path.join(path, f) for f in filenames) if os.path.exists(p)), None)


def load_diffusers(
    model_path: str, output_vae: bool = True, output_clip: bool = True, embedding_directory: Any = None
) -> tuple[Any, Any, Any]:
    """(MODEL, CLIP or None, VAE or None) of a diffusers pipeline folder given by path."""
    from nodes.loaders import make_ref, probe_arch

    folder = Path(model_path)
    if not folder.is_dir():
        raise FileNotFoundError(f"comfy.diffusers_load.load_diffusers: {model_path!r} is not a diffusers folder")
    arch, parts = probe_arch(folder)
    wanted = {"diffusion_model"} | ({"text_encoder"} if output_clip else set()) | ({"vae"} if output_vae else set())
    missing = wanted - parts
    if missing:
        raise ValueError(
            f"comfy.diffusers_load.load_diffusers: the diffusers folder {model_path!r} has no "
            f"{', '.join(sorted(missing))}"
        )
    return (
        wrap(make_ref("diffusion_model", arch, [folder])),
        wrap(make_ref("text_encoder", arch, [folder])) if output_clip else None,
        wrap(make_ref("vae", arch, [folder])) if output_vae else None,
    )
