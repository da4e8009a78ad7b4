"""`comfy_extras.nodes_*`: the module names of ComfyUI's extra nodes, which packs import to reuse or
subclass a node class. Each module answers the core node classes of this backend by class name (all of
them, as `nodes` does); a name this backend lacks raises an AttributeError naming it."""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
from types import ModuleType
from typing import Any

# The module names ComfyUI ships under comfy_extras/.
MODULE_NAMES = (
    "nodes_ace",
    "nodes_advanced_samplers",
    "nodes_align_your_steps",
    "nodes_apg",
    "nodes_attention_multiply",
    "nodes_audio",
    "nodes_audio_encoder",
    "nodes_camera_trajectory",
    "nodes_canny",
    "nodes_cfg",
    "nodes_chroma_radiance",
    "nodes_clip_sdxl",
    "nodes_compositing",
    "nodes_cond",
    "nodes_context_windows",
    "nodes_controlnet",
    "nodes_cosmos",
    "nodes_custom_sampler",
    "nodes_differential_diffusion",
    "nodes_easycache",
    "nodes_edit_model",
    "nodes_eps",
    "nodes_flux",
    "nodes_freelunch",
    "nodes_fresca",
    "nodes_gits",
    "nodes_hidream",
    "nodes_hooks",
    "nodes_hunyuan",
    "nodes_hunyuan3d",
    "nodes_hypernetwork",
    "nodes_hypertile",
    "nodes_images",
    "nodes_ip2p",
    "nodes_latent",
    "nodes_load_3d",
    "nodes_lora_extract",
    "nodes_lotus",
    "nodes_lt",
    "nodes_lumina2",
    "nodes_mahiro",
    "nodes_mask",
    "nodes_mochi",
    "nodes_model_advanced",
    "nodes_model_downscale",
    "nodes_model_merging",
    "nodes_model_merging_model_specific",
    "nodes_model_patch",
    "nodes_morphology",
    "nodes_optimalsteps",
    "nodes_pag",
    "nodes_perpneg",
    "nodes_photomaker",
    "nodes_pixart",
    "nodes_post_processing",
    "nodes_preview_any",
    "nodes_primitive",
    "nodes_qwen",
    "nodes_rebatch",
    "nodes_sag",
    "nodes_sd3",
    "nodes_sdupscale",
    "nodes_slg",
    "nodes_stable3d",
    "nodes_stable_cascade",
    "nodes_string",
    "nodes_tcfg",
    "nodes_tomesd",
    "nodes_torch_compile",
    "nodes_train",
    "nodes_upscale_model",
    "nodes_video",
    "nodes_video_model",
    "nodes_wan",
    "nodes_webcam",
)


# Names of a module that are not node classes: (module, attribute) -> where they live here.
EXTRAS = {
    ("nodes_custom_sampler", "Noise_RandomNoise"): "comfy_bridge.compat.comfy_extras._noise",
    ("nodes_custom_sampler", "Noise_EmptyNoise"): "comfy_bridge.compat.comfy_extras._noise",
    ("nodes_stable3d", "camera_embeddings"): "comfy_bridge.compat.comfy_extras._stable3d",
    ("nodes_model_advanced", "LCM"): "comfy_bridge.compat.comfy_extras._model_advanced",
    ("nodes_model_advanced", "ModelSamplingDiscreteDistilled"): "comfy_bridge.compat.comfy_extras._model_advanced",
    ("nodes_custom_sampler", "Guider_Basic"): "comfy_bridge.compat.comfy_extras._guiders",
    ("nodes_perpneg", "Guider_PerpNeg"): "comfy_bridge.compat.comfy_extras._guiders",
    ("nodes_mask", "composite"): "comfy_bridge.compat.comfy_extras._mask",
    ("nodes_sag", "gaussian_blur_2d"): "comfy_bridge.compat.comfy_extras._sag",
    ("nodes_lt", "get_noise_mask"): "comfy_bridge.compat.comfy_extras._lt",
    ("nodes_lt", "LTXVAddGuide"): "comfy_bridge.compat.comfy_extras._lt",
    # ComfyUI's older home of the helper (AnimateDiff-Evolved still reads it there)
    ("nodes_model_advanced", "rescale_zero_terminal_snr_sigmas"): "comfy_bridge.compat.comfy.model_sampling",
}


def _module(name: str) -> ModuleType:
    full = f"{__name__}.{name}"
    module = ModuleType(full, f"comfy_extras.{name}: core node classes by name")
    module.__spec__ = importlib.machinery.ModuleSpec(full, None)

    def lookup(attr: str) -> Any:
        if attr.startswith("__"):  # introspection (inspect, pickle) must not import the node package
            raise AttributeError(attr)
        if (name, attr) in EXTRAS:
            return getattr(importlib.import_module(EXTRAS[name, attr]), attr)
        import nodes

        if attr in nodes.NODE_CLASS_MAPPINGS:
            return nodes.NODE_CLASS_MAPPINGS[attr]
        if attr == "NODE_CLASS_MAPPINGS":
            return {}
        from comfy_bridge.packs.origin import UnsupportedAttribute

        raise UnsupportedAttribute(f"comfy_extras.{name}.{attr}", "no node class of that name here")

    module.__getattr__ = lookup  # type: ignore[method-assign]
    return module


for _name in MODULE_NAMES:
    sys.modules.setdefault(f"{__name__}.{_name}", _module(_name))
    globals()[_name] = sys.modules[f"{__name__}.{_name}"]
