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
    cpu=True,
    preview_size=512,
    preview_method=LatentPreviewMethod.NoPreviews,
    disable_smart_memory=False,
    cache_lru=0,
    cache_none=False,
    cache_classic=True,
    listen="127.0.0.1",
    port=8188,
    output_directory=None,
    input_directory=None,
    temp_directory=None,
    user_directory=None,
    base_directory=None,
    lowvram=False,
    novram=False,
    highvram=False,
    gpu_only=False,
    force_fp16=False,
    force_fp32=False,
    fp16_vae=False,
    bf16_vae=False,
    fp32_vae=False,
    disable_all_custom_nodes=False,
    disable_api_nodes=False,
    verbose="INFO",
    dont_print_server=False,
    multi_user=False,
    deterministic=False,
    enable_cors_header=None,
    max_upload_size=100,
    extra_model_paths_config=None,
    whitelist_custom_nodes=[],
    front_end_version=None,
    front_end_root=None,
    disable_metadata=False,
    windows_standalone_build=False,
    # The rest of ComfyUI 0.3.64's settings, at its defaults: packs read them (attention choice, precision).
    async_offload=False,
    auto_launch=False,
    bf16_text_enc=False,
    bf16_unet=False,
    comfy_api_base="https://api.comfy.org",
    cpu_vae=False,
    cuda_device=None,
    cuda_malloc=False,
    database_url=None,
    default_device=None,
    default_hashing_function="sha256",
    directml=None,
    disable_auto_launch=False,
    disable_cuda_malloc=False,
    disable_ipex_optimize=False,
    disable_mmap=False,
    disable_xformers=False,
    dont_upcast_attention=False,
    enable_compress_response_body=False,
    fast=set(),
    force_channels_last=False,
    force_non_blocking=False,
    force_upcast_attention=False,
    fp16_text_enc=False,
    fp16_unet=False,
    fp32_text_enc=False,
    fp32_unet=False,
    fp64_unet=False,
    fp8_e4m3fn_text_enc=False,
    fp8_e4m3fn_unet=False,
    fp8_e5m2_text_enc=False,
    fp8_e5m2_unet=False,
    fp8_e8m0fnu_unet=False,
    log_stdout=False,
    mmap_torch_files=False,
    normalvram=False,
    oneapi_device_selector=None,
    quick_test_for_ci=False,
    reserve_vram=None,
    supports_fp8_compute=False,
    tls_certfile=None,
    tls_keyfile=None,
    use_flash_attention=False,
    use_pytorch_cross_attention=False,
    use_quad_cross_attention=False,
    use_sage_attention=False,
    use_split_cross_attention=False,
)


class _LenientParser(argparse.ArgumentParser):
    """ComfyUI's command-line parser for packs that parse the command line themselves (some call
    `parser.parse_args()` at import). Arguments it does not know, or cannot parse, are ignored: this
    process's command line is the server's, not ComfyUI's, and a pack's import must not exit on it."""

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        try:
            known, _unknown = self.parse_known_args(args, namespace)
        except (argparse.ArgumentError, SystemExit):
            known, _unknown = self.parse_known_args([], namespace)
        return known

    def error(self, message: str):  # type: ignore[override]
        raise argparse.ArgumentError(None, message)


def _build_parser() -> argparse.ArgumentParser:
    p = _LenientParser(prog="comfy", add_help=False)
    p.add_argument("--listen", type=str, default=args.listen, nargs="?", const="0.0.0.0,::")
    p.add_argument(
        "--preview-method", type=LatentPreviewMethod, default=args.preview_method, choices=list(LatentPreviewMethod)
    )
    p.add_argument("--verbose", default=args.verbose, const="DEBUG", nargs="?")
    for name, default in sorted(vars(args).items()):
        if name in ("listen", "preview_method", "verbose"):
            continue
        flag = "--" + name.replace("_", "-")
        if isinstance(default, bool):
            p.add_argument(flag, dest=name, action="store_true", default=default)
        elif isinstance(default, (list, set)):
            p.add_argument(flag, dest=name, nargs="*", default=type(default)(default))
        elif isinstance(default, int):
            p.add_argument(flag, dest=name, type=int, default=default)
        else:
            p.add_argument(flag, dest=name, type=str, default=default)
    return p


parser = _build_parser()
