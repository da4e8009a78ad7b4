"""`comfy.cli_args.args`: the settings node packs read (defaults of ComfyUI's command line)."""
from __future__ import annotations

import argparse
import enum


class LatentPreviewMethod(enum.Enum):
    NoPreviews = "none"
    Auto = "auto"
    Latent2RGB = "latent2rgb"
    TAESD = "taesd"


args = argparse.Namespace(
    cpu=True, preview_size=512, preview_method=LatentPreviewMethod.NoPreviews, disable_smart_memory=False,
    cache_lru=0, cache_none=False, cache_classic=True, listen="127.0.0.1", port=8188, output_directory=None,
    input_directory=None, temp_directory=None, user_directory=None, base_directory=None, lowvram=False,
    novram=False, highvram=False, gpu_only=False, force_fp16=False, force_fp32=False, fp16_vae=False,
    bf16_vae=False, fp32_vae=False, disable_all_custom_nodes=False, disable_api_nodes=False, verbose="INFO",
    dont_print_server=False, multi_user=False, deterministic=False, enable_cors_header=None,
    max_upload_size=100, extra_model_paths_config=None, whitelist_custom_nodes=[], front_end_version=None,
    front_end_root=None, disable_metadata=False, windows_standalone_build=False,
)
