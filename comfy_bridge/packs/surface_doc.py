"""The ComfyUI module surface node packs use, and how much of it Comfy Cluster offers, as Markdown:
`python -m comfy_bridge.packs.surface_doc > docs/compat-surface.md`.

The lists below name what ComfyUI offers (shared/reference/comfyui-protocol.md §9.2 and the MODEL /
CLIP / VAE methods packs call); each name's status is read from our code, never written by hand:
- not supported: the name is missing (a missing module, or a proxy attribute only `__getattr__`
  answers, with UnsupportedAttribute), or its body does nothing but raise UnsupportedFeature;
- partly supported: it exists, but some path through it (or through a `self.` method it calls, or any
  method of a class) raises UnsupportedFeature / UnsupportedAttribute; the notes quote those raises;
- supported: it exists and raises neither.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SUPPORTED, PARTLY, NOT_SUPPORTED = "supported", "partly supported", "not supported"
UNSUPPORTED_ERRORS = ("UnsupportedFeature", "UnsupportedAttribute")

# Module -> the names ComfyUI offers there that packs use ("KSampler.SAMPLERS": an attribute of a name).
MODULE_SURFACE: dict[str, tuple[str, ...]] = {
    "folder_paths": (
        "base_path",
        "models_dir",
        "folder_names_and_paths",
        "supported_pt_extensions",
        "get_filename_list",
        "get_full_path",
        "get_full_path_or_raise",
        "get_folder_paths",
        "add_model_folder_path",
        "get_input_directory",
        "get_output_directory",
        "get_temp_directory",
        "get_user_directory",
        "set_input_directory",
        "set_output_directory",
        "set_temp_directory",
        "set_user_directory",
        "get_directory_by_type",
        "annotated_filepath",
        "get_annotated_filepath",
        "exists_annotated_filepath",
        "get_save_image_path",
        "filter_files_extensions",
        "filter_files_content_types",
        "recursive_search",
        "map_legacy",
        "get_input_subfolders",
        "cache_helper",
        "filename_list_cache",
        "get_filename_list_",
        "cached_filename_list_",
        "get_system_user_directory",
        "get_public_user_directory",
        "SYSTEM_USER_PREFIX",
        "is_within_directory",
        "extension_mimetypes_cache",
    ),
    "comfy.utils": (
        "ProgressBar",
        "PROGRESS_BAR_ENABLED",
        "set_progress_bar_enabled",
        "set_progress_bar_global_hook",
        "load_torch_file",
        "save_torch_file",
        "safetensors_header",
        "common_upscale",
        "lanczos",
        "bislerp",
        "repeat_to_batch_size",
        "resize_to_batch_size",
        "tiled_scale",
        "tiled_scale_multidim",
        "reshape_mask",
        "get_tiled_scale_steps",
        "state_dict_prefix_replace",
        "set_attr",
        "get_attr",
    ),
    "comfy.model_management": (
        "get_torch_device",
        "get_torch_device_name",
        "intermediate_device",
        "unet_offload_device",
        "text_encoder_device",
        "vae_device",
        "vae_dtype",
        "unet_dtype",
        "get_free_memory",
        "get_total_memory",
        "soft_empty_cache",
        "unload_all_models",
        "load_models_gpu",
        "load_model_gpu",
        "free_memory",
        "cleanup_models",
        "loaded_models",
        "current_loaded_models",
        "module_size",
        "cast_to_device",
        "should_use_fp16",
        "should_use_bf16",
        "is_device_mps",
        "is_device_cpu",
        "cpu_mode",
        "mps_mode",
        "xformers_enabled",
        "pytorch_attention_enabled",
        "vram_state",
        "VRAMState",
        "DISABLE_SMART_MEMORY",
        "OOM_EXCEPTION",
        "torch_version",
        "interrupt_current_processing",
        "processing_interrupted",
        "throw_exception_if_processing_interrupted",
        "InterruptProcessingException",
    ),
    "comfy.samplers": (
        "KSampler",
        "KSampler.SAMPLERS",
        "KSampler.SCHEDULERS",
        "SAMPLER_NAMES",
        "KSAMPLER_NAMES",
        "SCHEDULER_NAMES",
        "SCHEDULER_HANDLERS",
        "sampler_object",
        "ksampler",
        "KSAMPLER",
        "KSamplerX0Inpaint",
        "CFGGuider",
        "calculate_sigmas",
        "simple_scheduler",
        "normal_scheduler",
        "beta_scheduler",
        "ddim_scheduler",
        "linear_quadratic_schedule",
        "kl_optimal_scheduler",
        "cfg_function",
        "sampling_function",
        "calc_cond_batch",
        "sample",
    ),
    "comfy.sampler_helpers": (
        "prepare_mask",
        "get_models_from_cond",
        "convert_cond",
        "get_additional_models",
        "get_additional_models_from_model_options",
        "cleanup_additional_models",
        "cleanup_models",
        "estimate_memory",
        "prepare_sampling",
        "get_hooks_from_cond",
        "prepare_model_patcher",
    ),
    "comfy_extras.nodes_custom_sampler": ("Noise_RandomNoise", "Noise_EmptyNoise"),
    "comfy.sample": ("prepare_noise", "fix_empty_latent_channels", "sample", "sample_custom"),
    "comfy.sd": (
        "load_checkpoint_guess_config",
        "load_diffusion_model",
        "load_lora_for_models",
        "load_clip",
        "CLIP",
        "VAE",
    ),
    "comfy.model_patcher": ("ModelPatcher",),
    "comfy.cli_args": ("args", "LatentPreviewMethod"),
    "comfy.comfy_types": ("IO", "ComfyNodeABC", "InputTypeDict", "CheckLazyMixin", "FileLocator"),
    "comfy.controlnet": ("ControlNet", "load_controlnet"),
    "comfy.model_base": ("BaseModel", "ModelType"),
    "comfy.k_diffusion.sampling": (
        "sample_euler",
        "sample_euler_ancestral",
        "sample_heun",
        "sample_heunpp2",
        "sample_dpm_2",
        "sample_dpm_2_ancestral",
        "sample_lms",
        "sample_dpmpp_2s_ancestral",
        "sample_dpmpp_sde",
        "sample_dpmpp_2m",
        "sample_dpmpp_2m_sde",
        "sample_dpmpp_3m_sde",
        "sample_ddpm",
        "sample_lcm",
        "sample_ipndm",
        "sample_deis",
        "sample_euler_cfg_pp",
        "sample_euler_ancestral_cfg_pp",
        "sample_dpmpp_2m_cfg_pp",
        "sample_res_multistep",
        "sample_er_sde",
        "sample_seeds_2",
        "sample_sa_solver",
        "sample_dpm_fast",
        "sample_dpm_adaptive",
        "get_sigmas_karras",
        "get_sigmas_exponential",
        "get_sigmas_polyexponential",
        "get_sigmas_vp",
        "get_sigmas_laplace",
        "to_d",
        "append_dims",
        "append_zero",
        "get_ancestral_step",
        "default_noise_sampler",
        "BrownianTreeNoiseSampler",
        "sigma_to_half_log_snr",
        "half_log_snr_to_sigma",
    ),
    "latent_preview": (
        "prepare_callback",
        "get_previewer",
        "preview_to_image",
        "LatentPreviewer",
        "TAESD",
        "TAESDPreviewerImpl",
        "Latent2RGBPreviewer",
        "MAX_PREVIEW_RESOLUTION",
    ),
    "comfy.latent_formats": (
        "LatentFormat",
        "SD15",
        "SDXL",
        "SDXL_Playground_2_5",
        "SD3",
        "Flux",
        "SD_X4",
        "StableAudio1",
        "Mochi",
        "LTXV",
        "HunyuanVideo",
        "Wan21",
        "Wan22",
    ),
    "comfy.ops": (
        "disable_weight_init",
        "manual_cast",
        "cast_bias_weight",
        "cast_to_input",
        "CastWeightBiasOp",
        "pick_operations",
        "disable_weight_init.Linear",
        "disable_weight_init.Conv2d",
        "disable_weight_init.GroupNorm",
        "disable_weight_init.LayerNorm",
        "disable_weight_init.Embedding",
        "disable_weight_init.conv_nd",
        "manual_cast.Linear",
        "manual_cast.Conv2d",
    ),
    "comfy.diffusers_convert": (
        "convert_vae_state_dict",
        "convert_text_enc_state_dict_v20",
        "convert_text_enc_state_dict",
        "convert_unet_state_dict",
    ),
    "comfy.lora": ("load_lora", "calculate_weight", "model_lora_keys_unet", "model_lora_keys_clip"),
    "comfy.clip_vision": ("load", "clip_preprocess", "Output", "load_clipvision_from_sd"),
    "node_helpers": ("pillow", "conditioning_set_values", "hasher"),
    "nodes": (
        "NODE_CLASS_MAPPINGS",
        "NODE_DISPLAY_NAME_MAPPINGS",
        "EXTENSION_WEB_DIRS",
        "LOADED_MODULE_DIRS",
        "MAX_RESOLUTION",
        "before_node_execution",
        "interrupt_processing",
        "common_ksampler",
        "CheckpointLoaderSimple",
        "CLIPTextEncode",
        "KSampler",
        "KSamplerAdvanced",
        "VAEDecode",
        "VAEEncode",
        "EmptyLatentImage",
        "SaveImage",
        "PreviewImage",
        "LoadImage",
        "LoraLoader",
        "ControlNetApplyAdvanced",
    ),
    "execution": (
        "PromptExecutor",
        "PromptQueue",
        "validate_prompt",
        "validate_inputs",
        "get_input_data",
        "get_output_data",
        "_async_map_node_over_list",
        "execute",
        "ExecutionResult",
        "IsChangedCache",
    ),
    "protocol": ("BinaryEventTypes",),
    "server": ("PromptServer", "BinaryEventTypes"),
    "comfy_execution.graph": ("ExecutionBlocker", "DynamicPrompt"),
    "comfy_execution.graph_utils": ("GraphBuilder", "is_link", "ExecutionBlocker"),
    "comfy_api.latest": ("io", "ui", "ComfyExtension", "ComfyAPI", "ComfyAPISync", "Input", "InputImpl", "Types"),
    "comfy_api.v0_0_2": ("io", "ui", "ComfyExtension", "ComfyAPI", "ComfyAPISync", "Input", "InputImpl", "Types"),
    "app.user_manager": ("UserManager",),
}

SERVER_SURFACE = (
    "routes",
    "app",
    "loop",
    "send_sync",
    "send",
    "send_json",
    "send_bytes",
    "send_progress_text",
    "client_id",
    "last_node_id",
    "last_prompt_id",
    "number",
    "prompt_queue",
    "sockets",
    "sockets_metadata",
    "supports",
    "add_on_prompt_handler",
    "trigger_on_prompt",
    "user_manager",
    "web_root",
    "get_queue_info",
    "queue_updated",
)
QUEUE_SURFACE = (
    "put",
    "get_current_queue",
    "get_current_queue_volatile",
    "get_tasks_remaining",
    "wipe_queue",
    "delete_queue_item",
    "get_history",
    "wipe_history",
    "delete_history_item",
    "set_flag",
    "queue",
    "currently_running",
    "history",
)

# ComfyUI's ModelPatcher / CLIP / VAE methods and attributes packs use; the MODEL list is completed
# with every setter the proxy refuses (proxies.UNSUPPORTED_MODEL_SETTERS).
MODEL_SURFACE = (
    "clone",
    "is_clone",
    "model_options",
    "model",
    "get_model_object",
    "model_dtype",
    "model_size",
    "load_device",
    "offload_device",
    "set_model_sampler_cfg_function",
    "set_model_sampler_post_cfg_function",
    "set_model_sampler_pre_cfg_function",
    "add_patches",
    "get_key_patches",
    "add_object_patch",
    "model_state_dict",
    "patch_model",
    "unpatch_model",
)
CLIP_SURFACE = (
    "clone",
    "tokenize",
    "encode_from_tokens",
    "encode_from_tokens_scheduled",
    "encode",
    "clip_layer",
    "load_sd",
    "get_sd",
    "load_model",
    "add_patches",
    "get_key_patches",
    "patcher",
    "tokenizer",
    "cond_stage_model",
)
VAE_SURFACE = (
    "decode",
    "decode_tiled",
    "encode",
    "encode_tiled",
    "get_sd",
    "load_model",
    "downscale_ratio",
    "upscale_ratio",
    "latent_channels",
    "spacial_compression_decode",
    "spacial_compression_encode",
    "first_stage_model",
    "device",
    "vae_dtype",
    "patcher",
)
# model_options entries that ComfyUI's sampling reads; those not in proxies.HONOURED_OPTIONS ride along
# on the MODEL but the executors do not apply them.
MODEL_OPTION_KEYS = (
    "sampler_cfg_function",
    "sampler_post_cfg_function",
    "sampler_pre_cfg_function",
    "disable_cfg1_optimization",
    "transformer_options",
    "model_function_wrapper",
    "denoise_mask_function",
    "sampler_calc_cond_batch_function",
)


@dataclass(frozen=True)
class Row:
    name: str
    status: str
    notes: str = ""


# -- reading the code ------------------------------------------------------------------------------


def _render(node: ast.expr) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "…" for v in node.values)
    return "…"  # a name or expression: known only when the code runs


def _unsupported_raise(node: ast.AST) -> str | None:
    """The message of `raise UnsupportedFeature(feature, why)`, or None for any other statement."""
    if not isinstance(node, ast.Raise) or not isinstance(node.exc, ast.Call):
        return None
    func = node.exc.func
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    if name not in UNSUPPORTED_ERRORS:
        return None
    return ": ".join(_render(arg) for arg in node.exc.args[:2]) or name


def _function_ast(fn: Callable) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return None
    node = tree.body[0] if tree.body else None
    return node if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def _analyse(fn: Callable, owner: type | None = None, seen: set | None = None) -> tuple[bool, list[str]]:
    """(does the body only raise an unsupported error, the unsupported raises reachable from it)."""
    seen = set() if seen is None else seen
    if fn in seen:
        return False, []
    seen.add(fn)
    node = _function_ast(fn)
    if node is None:
        return False, []
    body = node.body[1:] if ast.get_docstring(node) is not None else node.body
    only = len(body) == 1 and _unsupported_raise(body[0]) is not None
    found = [msg for sub in ast.walk(node) if (msg := _unsupported_raise(sub)) is not None]
    if owner is not None:  # follow `self.helper(...)` into the class's own methods
        for sub in ast.walk(node):
            if (
                isinstance(sub, ast.Call)
                and isinstance(sub.func, ast.Attribute)
                and isinstance(sub.func.value, ast.Name)
                and sub.func.value.id == "self"
            ):
                helper = inspect.getattr_static(owner, sub.func.attr, None)
                if callable(helper):
                    found += _analyse(helper, owner, seen)[1]
    return only, list(dict.fromkeys(found))


def _unwrap(value: Any) -> Callable | None:
    if isinstance(value, property):
        return value.fget
    if isinstance(value, (staticmethod, classmethod)):
        return value.__func__
    return value if inspect.isfunction(value) else None


def classify(value: Any, owner: type | None = None) -> tuple[str, str]:
    """(status, notes) of a name that exists: a function, property, class or plain value."""
    fn = _unwrap(value)
    if fn is not None:
        only, found = _analyse(fn, owner)
        if only:
            return NOT_SUPPORTED, "; ".join(found)
        return (PARTLY, "refuses " + "; ".join(found)) if found else (SUPPORTED, "")
    if inspect.isclass(value) and value.__module__.startswith(("comfy_bridge", "nodes", "cluster")):
        found: list[str] = []
        for name, member in vars(value).items():
            member_fn = _unwrap(member)
            if member_fn is not None and name != "__getattr__":
                found += _analyse(member_fn, value)[1]
        found = list(dict.fromkeys(found))
        return (PARTLY, "refuses " + "; ".join(found)) if found else (SUPPORTED, "")
    return SUPPORTED, ""


def _lookup(target: Any, dotted: str) -> tuple[bool, Any, type | None]:
    """(found, value, owning class) of `a.b` on a module or class, without running module __getattr__s
    that raise for unknown names."""
    owner = None
    for part in dotted.split("."):
        try:
            value = inspect.getattr_static(target, part)
        except AttributeError:
            try:
                value = getattr(target, part)
            except AttributeError:
                return False, None, None
        owner = target if inspect.isclass(target) else None
        target = value
    return True, target, owner


def module_rows(module_name: str, names: tuple[str, ...], detailed: dict[type, str] | None = None) -> list[Row]:
    """Rows of a module's names; a class listed in `detailed` points to its own section instead."""
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return [Row(name, NOT_SUPPORTED, f"no `{module_name}` module") for name in names]
    rows = []
    for name in names:
        found, value, owner = _lookup(module, name)
        if not found:
            rows.append(Row(name, NOT_SUPPORTED, "missing"))
            continue
        status, notes = classify(value, owner)
        if status == PARTLY and inspect.isclass(value) and value in (detailed or {}):
            notes = f"method by method in the {detailed[value]} section"
        rows.append(Row(name, status, notes))
    return rows


def _init_attributes(cls: type) -> set[str]:
    """Attributes `__init__` assigns on self (instance attributes getattr_static cannot see on the class)."""
    node = _function_ast(cls.__init__)
    if node is None:
        return set()
    return {
        t.attr
        for sub in ast.walk(node)
        for t in getattr(sub, "targets", [getattr(sub, "target", None)])
        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
    }


def class_rows(cls: type, names: tuple[str, ...], instance_attributes: set[str] = frozenset()) -> list[Row]:
    rows = []
    for name in names:
        member = inspect.getattr_static(cls, name, None)
        if member is not None:
            rows.append(Row(name, *classify(member, cls)))
        elif name in instance_attributes:
            rows.append(Row(name, SUPPORTED))
        else:
            missing = (
                "answered by `__getattr__` with UnsupportedAttribute" if hasattr(cls, "__getattr__") else "missing"
            )
            rows.append(Row(name, NOT_SUPPORTED, missing))
    return rows


# -- the document ------------------------------------------------------------------------------------


def sections() -> list[tuple[str, list[Row]]]:
    # `nodes` (and torch) first: comfy_extras' module __getattr__ imports `nodes` when anything, such as
    # inspect during torch's import, asks a comfy_extras module for a dunder attribute. Its node modules
    # load on first use: load them now, as the attributes are read statically below.
    import nodes

    nodes.NODE_CLASS_MAPPINGS  # noqa: B018
    from comfy_bridge import compat

    compat.install()
    from comfy_bridge.compat.comfy_extras import MODULE_NAMES
    from comfy_bridge.packs import proxies
    from comfy_bridge.server.app import PromptServer
    from comfy_bridge.server.prompt_queue import PromptQueue

    detailed = {proxies.ModelPatcher: "MODEL", proxies.CLIP: "CLIP", proxies.VAE: "VAE"}
    out = [(f"`{name}`", module_rows(name, names, detailed)) for name, names in MODULE_SURFACE.items()]
    out.append(
        ("`server.PromptServer.instance`", class_rows(PromptServer, SERVER_SURFACE, _init_attributes(PromptServer)))
    )
    out.append(
        (
            "`server.PromptServer.instance.prompt_queue`",
            class_rows(PromptQueue, QUEUE_SURFACE, _init_attributes(PromptQueue)),
        )
    )
    extras = importlib.import_module("comfy_extras")
    probe = getattr(extras, MODULE_NAMES[0])
    core = importlib.import_module("nodes").NODE_CLASS_MAPPINGS
    answers_core = all(getattr(probe, name, None) is cls for name, cls in core.items())
    out.append(
        (
            "`comfy_extras`",
            [
                Row(
                    "nodes_*",
                    PARTLY if answers_core else NOT_SUPPORTED,
                    f"{len(MODULE_NAMES)} modules ({', '.join(MODULE_NAMES)}); each answers the "
                    "core node classes by name, none of ComfyUI's extra nodes",
                )
            ],
        )
    )
    out.append(
        (
            "MODEL (`comfy.model_patcher.ModelPatcher`)",
            class_rows(proxies.ModelPatcher, MODEL_SURFACE + tuple(proxies.UNSUPPORTED_MODEL_SETTERS)),
        )
    )
    out.append(
        (
            "MODEL `model_options` entries applied by the executors",
            [
                Row(key, SUPPORTED)
                if key in proxies.HONOURED_OPTIONS
                else Row(key, NOT_SUPPORTED, "kept on the MODEL, not applied by the executors")
                for key in MODEL_OPTION_KEYS
            ],
        )
    )
    out.append(("CLIP (`comfy.sd.CLIP`)", class_rows(proxies.CLIP, CLIP_SURFACE)))
    out.append(("VAE (`comfy.sd.VAE`)", class_rows(proxies.VAE, VAE_SURFACE)))
    return out


def _cell(text: str) -> str:
    return " ".join(text.replace("|", "\\|").split())


INVENTORY = Path(__file__).resolve().parents[2] / "docs" / "compat-inventory.json"


def coverage_lines(inventory_path: Path = INVENTORY) -> list[str]:
    """The coverage section: the two figures of the committed pack-use inventory (compat-inventory.json)."""
    cov = json.loads(inventory_path.read_text())["coverage"]

    def figure(key: str) -> str:
        c = cov[key]
        return f"{c['supported']} of {c['names']} ({100 * c['supported'] / c['names']:.1f} %)"

    return [
        "",
        "## Coverage of the names packs use",
        "",
        "[compat-inventory.md](compat-inventory.md) lists every ComfyUI name the most used packs use, read",
        "from their sources by `scripts/compat_inventory.py`, with each one's status here. Supported:",
        f"{figure('module_level')} of the names used at module level (while a pack is imported) and",
        f"{figure('inside_functions')} of those used inside functions (when a node runs); the others are",
        "listed there with the error they raise.",
    ]


def render() -> str:
    parts = sections()
    lines = [
        "# The ComfyUI module surface in Comfy Cluster",
        "",
        "Generated from the code by `python -m comfy_bridge.packs.surface_doc > docs/compat-surface.md`;",
        "do not edit by hand (a test fails when this file and the code disagree).",
        "",
        "Each name is one ComfyUI offers to node packs. *supported*: present and never raises an",
        "unsupported-feature error; *partly supported*: present, but some calls raise one (the notes quote",
        "them; the error names the pack, the node and the feature); *not supported*: missing, or it only",
        "raises that error.",
        "",
        "| part | supported | partly supported | not supported |",
        "|---|---|---|---|",
    ]
    for title, rows in parts:
        counts = [sum(r.status == s for r in rows) for s in (SUPPORTED, PARTLY, NOT_SUPPORTED)]
        lines.append(f"| {title} | {counts[0]} | {counts[1]} | {counts[2]} |")
    lines += coverage_lines()
    for title, rows in parts:
        lines += ["", f"## {title}", "", "| name | status | notes |", "|---|---|---|"]
        lines += [f"| `{r.name}` | {r.status} | {_cell(r.notes)} |" for r in rows]
    return "\n".join(lines) + "\n"


def main() -> int:
    sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
