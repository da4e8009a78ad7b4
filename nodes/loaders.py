"""Loader nodes. They only name weights: each returns ModelRefs (file digests, component, patches);
the weights are read where a ModelFn runs, through that executor's weight cache."""

from __future__ import annotations

import functools
import os
from pathlib import Path

from cluster.refs import ModelRef, Patch, file_digest
from nodes.workspace import active


def model_file(folder: str, name: str, input_name: str) -> Path:
    path = active().full_path(folder, name)
    if path is None:
        raise FileNotFoundError(f"{input_name}: {name!r} is not a file in the {folder} folder")
    return path


@functools.lru_cache(maxsize=256)
def _probe(path: str, size: int, mtime_ns: int) -> tuple[str, frozenset[str]]:
    from nodes.models.loader import probe

    info = probe(Path(path))
    return info.arch, frozenset(info.components)


def probe_arch(path: Path, input_name: str | None = None) -> tuple[str, frozenset[str]]:
    """Architecture and components of a model file, read from its header once per file version;
    errors name the input."""
    from nodes.models.errors import ModelLoadError

    try:
        st = os.stat(path)
        return _probe(str(path), st.st_size, st.st_mtime_ns)
    except ModelLoadError as e:
        if input_name is None:
            raise
        raise ValueError(f"{input_name}: {e}") from e


@functools.lru_cache(maxsize=256)
def _file_prediction(path: str, size: int, mtime_ns: int) -> tuple[bool, bool]:
    """(v-prediction, zero terminal SNR) an SD-family UNet file asks for, read as its loader reads them: the
    `v_pred` / `ztsnr` marker keys, or for SD2 ComfyUI's rule on one norm bias (only that tensor is read)."""
    import torch

    from nodes.models import unet as unet_mod
    from nodes.models.loader import probe
    from nodes.models.safetensors_io import is_torch_pickle, load_state_dict, shapes_of

    info = probe(Path(path))
    keys = shapes_of(path)[0].keys()
    marker = info.prefix + unet_mod.SD2_V_MARKER
    found = {k: torch.empty(0) for k in ("v_pred",) if k in keys}
    if info.arch == "sd2" and marker in keys:
        if is_torch_pickle(path):
            found[unet_mod.SD2_V_MARKER] = load_state_dict(path)[marker]
        else:
            from safetensors import safe_open

            with safe_open(path, framework="pt") as f:
                found[unet_mod.SD2_V_MARKER] = f.get_tensor(marker)
    return unet_mod.prediction_type(info.arch, found) == "v", "ztsnr" in keys


def with_file_prediction(model: ModelRef, path: Path) -> ModelRef:
    """An SD1/SD2/SDXL MODEL sampled as its file says (ComfyUI's model_type at load): v-prediction files get
    ComfyUI's ModelSamplingDiscrete v_prediction on the model's own schedule; others are left as they are."""
    if model.arch not in ("sd1", "sd2", "sdxl") or path.is_dir():
        return model
    st = os.stat(path)
    v, zsnr = _file_prediction(str(path), st.st_size, st.st_mtime_ns)
    if not v:
        return model
    from nodes.library.model_advanced import ModelSamplingDiscrete

    return ModelSamplingDiscrete().patch(model, "v_prediction", zsnr)[0]


def make_ref(component: str, arch: str, paths: list[Path], **options) -> ModelRef:
    return ModelRef(
        component=component,
        arch=arch,
        sources=tuple(str(p) for p in paths),
        digests=tuple(file_digest(p) for p in paths),
        options=tuple(sorted(options.items())),
    )


def model_files(folder: str) -> list[str]:
    return active().list_files(folder)


class CheckpointLoaderSimple:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"ckpt_name": (model_files("checkpoints"), {"tooltip": "The checkpoint file to load."})}}

    MODEL_FILE_INPUTS = {"ckpt_name": ("checkpoints", "diffusion_model")}  # checked at validation
    RETURN_TYPES = ("MODEL", "CLIP", "VAE")
    OUTPUT_TOOLTIPS = (
        "The diffusion model that denoises latents.",
        "The text encoder that turns prompts into conditioning.",
        "The VAE that maps between images and latents.",
    )
    FUNCTION = "load_checkpoint"
    CATEGORY = "loaders"
    DESCRIPTION = "Loads a single-file diffusion checkpoint: its diffusion model, text encoder and VAE."

    def load_checkpoint(self, ckpt_name):
        path = model_file("checkpoints", ckpt_name, "ckpt_name")
        arch, parts = probe_arch(path, "ckpt_name")
        model = (
            with_file_prediction(make_ref("diffusion_model", arch, [path]), path)
            if "diffusion_model" in parts
            else None
        )
        return (model, *(make_ref(c, arch, [path]) if c in parts else None for c in ("text_encoder", "vae")))


class UNETLoader:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "unet_name": (model_files("diffusion_models"),),
                "weight_dtype": (["default", "fp8_e4m3fn", "fp8_e4m3fn_fast", "fp8_e5m2"],),
            }
        }

    MODEL_FILE_INPUTS = {"unet_name": ("diffusion_models", "diffusion_model")}
    RETURN_TYPES = ("MODEL",)
    FUNCTION = "load_unet"
    CATEGORY = "advanced/loaders"

    def load_unet(self, unet_name, weight_dtype):
        path = model_file("diffusion_models", unet_name, "unet_name")
        arch, _ = probe_arch(path, "unet_name")
        return (with_file_prediction(make_ref("diffusion_model", arch, [path], weight_dtype=weight_dtype), path),)


class VAELoader:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"vae_name": (model_files("vae") + ["pixel_space"],)}}

    MODEL_FILE_INPUTS = {"vae_name": ("vae", "vae")}
    RETURN_TYPES = ("VAE",)
    FUNCTION = "load_vae"
    CATEGORY = "loaders"

    def load_vae(self, vae_name):
        # ComfyUI's file-less VAE of the pixel-space families (nodes/models/pixel_space.py)
        if vae_name == "pixel_space":
            return (make_ref("vae", "pixel_space", []),)
        path = model_file("vae", vae_name, "vae_name")
        arch, _ = probe_arch(path, "vae_name")
        return (make_ref("vae", arch, [path]),)


CLIP_TYPES = [
    "stable_diffusion",
    "stable_cascade",
    "sd3",
    "stable_audio",
    "mochi",
    "ltxv",
    "pixart",
    "cosmos",
    "lumina2",
    "wan",
    "hidream",
    "chroma",
    "ace",
    "omnigen2",
    "qwen_image",
    "hunyuan_image",
    "flux2",
    "krea2",
    "minimax",
    "flux3",
    "mage",
    "moss_image",
    "pixeldit",
    "cogvideox",
]
DUAL_CLIP_TYPES = [
    "sdxl",
    "sd3",
    "flux",
    "hunyuan_video",
    "hidream",
    "hunyuan_image",
    "hunyuan_video_15",
    "kandinsky5",
    "kandinsky5_image",
]
# The CLIP types whose text encoders we can build; the others are refused with a clear error.
# lumina2: the type the frontend's default Z-Image-Turbo graph uses.
_CLIP_TYPE_ARCH = {
    "stable_diffusion": "sd1",
    "sdxl": "sdxl",
    "sd3": "sd3",
    "flux": "flux",
    "flux2": "flux2",
    "lumina2": "zimage",
    "qwen_image": "qwen_image",
    "wan": "wan21",
    "chroma": "chroma",
    "pixart": "pixart_sigma",  # T5-XXL alone with PixArt's tokenizer settings (nodes.models.pixart)
    "hidream": "hidream",
    "stable_cascade": "stable_cascade_c",
    "mochi": "mochi",  # T5-XXL for Mochi 1 preview (nodes.models.mochi_text)
    "cogvideox": "cogvideox",  # T5-XXL for CogVideoX / VOID (nodes.models.cogvideox_text)
    "ltxv": "ltxv",  # T5-XXL for LTX-Video 0.9 (nodes.models.ltxv_text); LTX-2.5's Gemma 4 is told apart above
    "hunyuan_image": "hunyuan_image",  # Qwen2.5-VL with Hunyuan Image 2.1's template (nodes.models.hunyuan_image_text)
    "hunyuan_video": "hunyuan_video",  # llava-llama3 + CLIP-L for HunyuanVideo 1.0 (nodes.models.hunyuan_video_text)
    "hunyuan_video_15": "hunyuan_video15",  # Qwen2.5-VL (+ ByT5) for HunyuanVideo 1.5 (nodes.models.hunyuan_video15_text)
    "kandinsky5": "kandinsky5",  # Qwen2.5-VL + CLIP-L with the video template (nodes.models.kandinsky5_text)
    "kandinsky5_image": "kandinsky5",  # the same with the image model's template
}


def _clip_arch(clip_type: str) -> str:
    if clip_type not in _CLIP_TYPE_ARCH:
        raise ValueError(
            f"type: CLIP type {clip_type!r} is not supported by Comfy Cluster yet "
            f"(supported: {', '.join(_CLIP_TYPE_ARCH)})"
        )
    return _CLIP_TYPE_ARCH[clip_type]


class CLIPLoader:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {"clip_name": (model_files("text_encoders"),), "type": (CLIP_TYPES,)},
            "optional": {"device": (["default", "cpu"], {"advanced": True})},
        }

    MODEL_FILE_INPUTS = {"clip_name": ("text_encoders", "text_encoder")}
    RETURN_TYPES = ("CLIP",)
    FUNCTION = "load_clip"
    CATEGORY = "advanced/loaders"

    def load_clip(self, clip_name, type="stable_diffusion", device="default"):
        path = model_file("text_encoders", clip_name, "clip_name")
        return (make_ref("text_encoder", _single_clip_arch(path, type), [path], clip_type=type),)


def _single_clip_arch(path: Path, clip_type: str) -> str:
    """The family of CLIPLoader's file, from its header: ComfyUI makes a Qwen3 file Flux2-Klein's encoder for
    the flux/flux2 types and Z-Image's for every other type; a Gemma 2 file is Lumina 2's whatever the type."""
    file_arch, _ = probe_arch(path, "clip_name")
    if file_arch == "qwen35":  # ComfyUI reads Qwen3.5 whatever the type (FLUX 3's prompt upsampler has flux3)
        return "qwen35"
    if file_arch == "gemma4":  # LTX-2.5's Gemma 4 with its projection (nodes/models/ltx25_text.py)
        if clip_type != "ltxv":
            raise ValueError(f"clip_name: {path.name} is a Gemma 4 text encoder; it loads as LTX-2.5's with type ltxv")
        return "ltx2"
    if file_arch == "t5_old":  # ComfyUI reads the old T5-XXL as Cosmos' encoder whatever the type
        return "cosmos_predict2"
    if file_arch == "mistral3":  # ComfyUI reads Mistral 3 (FLUX.2 dev's encoder) whatever the type
        return "flux2"
    if clip_type == "mage" and file_arch != "qwen3vl":
        raise ValueError(
            f"clip_name: {path.name} is a {file_arch} file; CLIPLoader type mage loads Mage-Flow's Qwen3-VL-4B text "
            "encoder (qwen3vl_4b*.safetensors)"
        )
    if clip_type == "flux3" and file_arch != "qwen3vl":
        raise ValueError(
            f"clip_name: {path.name} is a {file_arch} file; CLIPLoader type flux3 loads FLUX 3's Qwen3-VL-4B text "
            "encoder (qwen3vl_4b*.safetensors)"
        )
    if file_arch == "qwen3_06b":  # ComfyUI reads Qwen3 0.6B as Anima's encoder whatever the type
        return "anima"
    if file_arch == "qwen3":
        return "flux2" if clip_type in ("flux", "flux2") else "zimage"
    if file_arch == "qwen3vl":  # ComfyUI: Qwen-Image 2.1's encoder with type qwen_image, Krea 2's with krea2
        if clip_type == "krea2":
            return "krea2"
        if clip_type == "minimax":  # MiniMax H3's Qwen3-VL-32B
            return "minimax_h3"
        if clip_type == "flux3":  # FLUX 3's Qwen3-VL-4B
            return "flux3"
        if clip_type == "mage":  # Mage-Flow's Qwen3-VL-4B
            return "mage_flow"
        if clip_type != "qwen_image":
            raise ValueError(
                f"clip_name: {path.name} is a Qwen3-VL text encoder; it loads as Krea 2's with "
                f"CLIPLoader type krea2, as FLUX 3's with type flux3, as Mage-Flow's with type mage, as MiniMax H3's "
                f"with type minimax or as "
                f"Qwen-Image 2.1's with type qwen_image, not {clip_type}"
            )
        return "qwen_image21"
    if clip_type == "pixeldit":  # ComfyUI's PixelDiTGemma2TE: Gemma 2 2B-it's last hidden state
        if file_arch != "gemma2":
            raise ValueError(
                f"clip_name: {path.name} is a {file_arch} text encoder; CLIPLoader type pixeldit loads "
                "Gemma 2 2B-it (gemma_2_2b_it_elm_bf16.safetensors)"
            )
        return "pixeldit"
    if file_arch == "gemma2":  # ComfyUI reads Gemma 2 2B as Lumina 2's encoder whatever the type
        return "lumina2"
    if clip_type == "lumina2":
        raise ValueError(
            f"clip_name: {path.name} is a {file_arch} text encoder; CLIPLoader type lumina2 loads "
            "Z-Image's Qwen3-4B (qwen_3_4b.safetensors) or Lumina 2's Gemma 2 (gemma_2_2b.safetensors)"
        )
    if clip_type == "wan" and file_arch != "umt5":
        raise ValueError(
            f"clip_name: {path.name} is a {file_arch} text encoder; CLIPLoader type wan loads "
            "umt5-xxl (umt5_xxl_fp8_e4m3fn_scaled.safetensors)"
        )
    if clip_type in ("chroma", "pixart", "ltxv") and file_arch != "t5":
        raise ValueError(
            f"clip_name: {path.name} is a {file_arch} text encoder; CLIPLoader type {clip_type} loads "
            "T5-XXL (t5xxl_fp16.safetensors or t5xxl_fp8_e4m3fn_scaled.safetensors)"
        )
    if clip_type == "hunyuan_image" and file_arch != "qwen25":
        raise ValueError(
            f"clip_name: {path.name} is a {file_arch} text encoder; CLIPLoader type hunyuan_image loads Qwen2.5-VL "
            "(qwen_2.5_vl_7b.safetensors)"
        )
    if clip_type == "flux2":
        raise ValueError(
            f"clip_name: {path.name} is a {file_arch} text encoder; CLIPLoader type flux2 loads "
            "FLUX.2 Klein's Qwen3 (qwen_3_4b.safetensors) or FLUX.2 dev's Mistral 3 (mistral_3_small_flux2_bf16.safetensors)"
        )
    return _clip_arch(clip_type)


class DualCLIPLoader:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "clip_name1": (model_files("text_encoders"),),
                "clip_name2": (model_files("text_encoders"),),
                "type": (DUAL_CLIP_TYPES,),
            },
            "optional": {"device": (["default", "cpu"], {"advanced": True})},
        }

    MODEL_FILE_INPUTS = {f"clip_name{i}": ("text_encoders", "text_encoder") for i in (1, 2)}
    RETURN_TYPES = ("CLIP",)
    FUNCTION = "load_clip"
    CATEGORY = "advanced/loaders"

    def load_clip(self, clip_name1, clip_name2, type, device="default"):
        paths = [
            model_file("text_encoders", clip_name1, "clip_name1"),
            model_file("text_encoders", clip_name2, "clip_name2"),
        ]
        return (make_ref("text_encoder", _clip_arch(type), paths, clip_type=type),)


class CLIPSetLastLayer:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "clip": ("CLIP",),
                "stop_at_clip_layer": ("INT", {"default": -1, "min": -24, "max": -1, "step": 1}),
            }
        }

    RETURN_TYPES = ("CLIP",)
    FUNCTION = "set_last_layer"
    CATEGORY = "conditioning"

    def set_last_layer(self, clip, stop_at_clip_layer):
        return (clip.with_option("layer", stop_at_clip_layer),)


def _lora_patch(lora_name: str, strength: float) -> Patch:
    path = model_file("loras", lora_name, "lora_name")
    return Patch(str(path), file_digest(path), float(strength))


class LoraLoader:
    @classmethod
    def INPUT_TYPES(cls):
        strength = {"default": 1.0, "min": -100.0, "max": 100.0, "step": 0.01}
        return {
            "required": {
                "model": ("MODEL", {"tooltip": "The diffusion model the LoRA is applied to."}),
                "clip": ("CLIP", {"tooltip": "The text encoder the LoRA is applied to."}),
                "lora_name": (model_files("loras"), {"tooltip": "The LoRA file."}),
                "strength_model": ("FLOAT", strength),
                "strength_clip": ("FLOAT", strength),
            }
        }

    MODEL_FILE_INPUTS = {"lora_name": ("loras", "lora")}
    RETURN_TYPES = ("MODEL", "CLIP")
    FUNCTION = "load_lora"
    CATEGORY = "loaders"
    DESCRIPTION = "Patches the diffusion model and text encoder with a LoRA."

    def load_lora(self, model, clip, lora_name, strength_model, strength_clip):
        if strength_model == 0 and strength_clip == 0:
            return (model, clip)
        patch_m = _lora_patch(lora_name, strength_model)
        return (
            model.with_patch(patch_m) if strength_model != 0 else model,
            clip.with_patch(Patch(patch_m.path, patch_m.digest, float(strength_clip)))
            if strength_clip != 0 and clip is not None
            else clip,
        )


class LoraLoaderModelOnly:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL",),
                "lora_name": (model_files("loras"),),
                "strength_model": ("FLOAT", {"default": 1.0, "min": -100.0, "max": 100.0, "step": 0.01}),
            }
        }

    MODEL_FILE_INPUTS = {"lora_name": ("loras", "lora")}
    RETURN_TYPES = ("MODEL",)
    FUNCTION = "load_lora_model_only"
    CATEGORY = "loaders"

    def load_lora_model_only(self, model, lora_name, strength_model):
        if strength_model == 0:
            return (model,)
        return (model.with_patch(_lora_patch(lora_name, strength_model)),)


class ControlNetLoader:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"control_net_name": (model_files("controlnet"),)}}

    MODEL_FILE_INPUTS = {"control_net_name": ("controlnet", "controlnet")}
    RETURN_TYPES = ("CONTROL_NET",)
    FUNCTION = "load_controlnet"
    CATEGORY = "loaders"

    def load_controlnet(self, control_net_name):
        return (controlnet_ref(model_file("controlnet", control_net_name, "control_net_name"), "control_net_name"),)


def controlnet_ref(path: Path, input_name: str) -> ModelRef:
    """The CONTROL_NET of a ControlNet file; any other file (a LoRA, a checkpoint) is refused here, naming the
    input, as ComfyUI's loader fails on a file with no ControlNet in it: its ref would only fail (or, on a model
    that never reads controls, be dropped) when sampling."""
    arch, components = probe_arch(path, input_name)
    if "controlnet" not in components:
        from nodes.models.loader import probe

        kind = probe(path).kind
        raise ValueError(f"{input_name}: {path.name} is a {kind} file ({arch}), not a ControlNet")
    return make_ref("controlnet", arch, [path])


NODE_CLASS_MAPPINGS = {
    "CheckpointLoaderSimple": CheckpointLoaderSimple,
    "UNETLoader": UNETLoader,
    "VAELoader": VAELoader,
    "CLIPLoader": CLIPLoader,
    "DualCLIPLoader": DualCLIPLoader,
    "CLIPSetLastLayer": CLIPSetLastLayer,
    "LoraLoader": LoraLoader,
    "LoraLoaderModelOnly": LoraLoaderModelOnly,
    "ControlNetLoader": ControlNetLoader,
}
NODE_DISPLAY_NAME_MAPPINGS = {
    "CheckpointLoaderSimple": "Load Checkpoint",
    "UNETLoader": "Load Diffusion Model",
    "VAELoader": "Load VAE",
    "CLIPLoader": "Load CLIP",
    "DualCLIPLoader": "DualCLIPLoader",
    "CLIPSetLastLayer": "CLIP Set Last Layer",
    "LoraLoader": "Load LoRA",
    "LoraLoaderModelOnly": "LoraLoaderModelOnly",
    "ControlNetLoader": "Load ControlNet Model",
}
