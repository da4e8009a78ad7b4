"""The public loading API the ModelFns call: ModelRef -> DiffusionModel / TextEncoder / VAE / ControlNet.

Sources are single files (checkpoints, bare UNets, VAEs, text encoders, ControlNets) or diffusers folders.
Shapes give the network sizes; nodes/models/configs/<arch>/ gives the schedule and text-encoder choices.
Flux and SD3 are handed to nodes.models.flux (imported only when needed)."""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch

from cluster.refs import ModelRef

from . import clip as clip_mod
from . import controlnet as cn_mod
from . import controlnet_union as union_mod
from . import merge as merge_mod
from . import unet as unet_mod
from . import unet_diffusers
from . import vae as vae_mod
from .components import SD1_LATENT, SDXL_LATENT, DiffusionModel, TextEncoder, VAEModel
from .detect import CheckpointInfo, probe
from .errors import ModelLoadError
from .lora import TE_FAMILY, LoraTargets, clip_targets, merge_loras, unet_targets
from .safetensors_io import build_module, load_state_dict
from .tokenizer import BYTE_VOCAB_SIZE, ClipBPE, SDTokenizer, bpe_for_vocab_size

CONFIGS = Path(__file__).parent / "configs"
LATENTS = {"sd1": SD1_LATENT, "sd2": SD1_LATENT, "sdxl": SDXL_LATENT, "lotus": SD1_LATENT}
# Lotus-D is an SD2 UNet (ComfyUI's supported_models.LotusD derives from SD20): SD2's noise schedule, but it predicts
# the clean latent from the unscaled input (ModelType.IMG_TO_IMG).
SCHEDULE_OF = {"lotus": "sd2"}
PREDICTION_OF = {"lotus": "img_to_img"}
DIT_ARCHS = (
    "flux",
    "sd3",
    "flux2",
    "zimage",
    "lumina2",
    "qwen_image",
    "qwen_image21",
    "mage_flow",
    "krea2",
    "anima",
    "cosmos_predict2",
    "chroma",
    "chroma_radiance",
    "pixeldit",
    "hidream",
    "flux3",
    "moss_image",
    "wan21",
    "wan22_5b",
    "minimax_h3",
    "minimax_h3_audio",
    "ltx2",
    "ltxv",
    "svd",
    "pixart_alpha",
    "pixart_sigma",
    "stable_cascade_c",
    "stable_cascade_b",
    "seedvr2",
    "hunyuan_image",
    "hunyuan_video15",
    "hunyuan_video",
    "mochi",
    "cogvideox",
    "kandinsky5",
    "kandinsky5_image",
    "hunyuan_dit",
    "hunyuan_dit1",
)
# Families whose VAE is loaded here with no diffusion model of their own: HunyuanVideo 1.0's (Kandinsky 5's video VAE)
VAE_ARCHS = ("hunyuan_video",)
__all__ = ["probe", "load_diffusion_model", "load_text_encoder", "load_vae", "load_controlnet", "CheckpointInfo"]


def import_model_code() -> None:
    """Import the model classes the SD-family loaders build (diffusers' UNet and VAE, transformers' CLIP):
    seconds of imports that an executor pays at start (ModelFn.warm_up) instead of in its first prompt.
    Importing diffusers' models imports its transformer package too, which holds the DiT families'."""
    from diffusers import AutoencoderKL, UNet2DConditionModel  # noqa: F401
    from transformers import CLIPTextModel, CLIPTextModelWithProjection  # noqa: F401


# ---- shared helpers ---------------------------------------------------------------------------------------


def _source(ref: ModelRef, i: int = 0) -> tuple[str, str | None]:
    if i >= len(ref.sources):
        raise ModelLoadError(None, f"the {ref.component} reference names no source file")
    return ref.sources[i], ref.digests[i] if i < len(ref.digests) else None


def _sd(ref: ModelRef, i: int = 0) -> dict[str, torch.Tensor]:
    path, digest = _source(ref, i)
    return load_state_dict(path, digest)


FLUX_MODULES = ("nodes.models.flux", "nodes.models.flux_text", "nodes.models.flux_vae")
SD3_MODULES = ("nodes.models.sd3",)
FLUX2_MODULES = ("nodes.models.flux2", "nodes.models.flux2_text", "nodes.models.flux2_vae")
_ARCH_MODULES = {
    "sd3": SD3_MODULES,
    "flux2": FLUX2_MODULES,
    "zimage": ("nodes.models.zimage",),
    "lumina2": ("nodes.models.lumina2",),
    "qwen_image": ("nodes.models.qwen_image",),
    "qwen_image21": ("nodes.models.qwen_image21",),
    "mage_flow": ("nodes.models.mage_flow",),
    "krea2": ("nodes.models.krea2",),
    "anima": ("nodes.models.anima",),
    "cosmos_predict2": ("nodes.models.cosmos_predict2",),
    "hidream": ("nodes.models.hidream",),
    "chroma": ("nodes.models.chroma",),
    "chroma_radiance": ("nodes.models.chroma_radiance",),
    "pixeldit": ("nodes.models.pixeldit",),
    "flux3": ("nodes.models.flux3",),
    "moss_image": ("nodes.models.moss_image",),
    "qwen35": ("nodes.models.qwen35_text",),
    "mistral3": ("nodes.models.flux2_mistral",),
    # HuMo files first, then S2V files, the others pass through
    "wan21": ("nodes.models.wan_humo", "nodes.models.wan_s2v", "nodes.models.wan"),
    "wan22_5b": ("nodes.models.wan",),
    "minimax_h3": ("nodes.models.minimax_h3_engine",),
    "minimax_h3_audio": ("nodes.models.minimax_h3_audio",),
    "ltx2": ("nodes.models.ltx2", "nodes.models.ltx2_vae", "nodes.models.ltx2_text"),
    "ltxv": ("nodes.models.ltxv", "nodes.models.ltxv_text"),
    "mochi": ("nodes.models.mochi", "nodes.models.mochi_vae"),
    "cogvideox": ("nodes.models.cogvideox",),
    "svd": ("nodes.models.svd",),
    "pixart_alpha": ("nodes.models.pixart",),
    "pixart_sigma": ("nodes.models.pixart",),
    "stable_cascade_c": ("nodes.models.stable_cascade",),
    "stable_cascade_b": ("nodes.models.stable_cascade",),
    "seedvr2": ("nodes.models.seedvr2_vae", "nodes.models.seedvr2_model"),
    "hunyuan_image": ("nodes.models.hunyuan_image",),
    "hunyuan_video15": ("nodes.models.hunyuan_video15",),
    "kandinsky5": ("nodes.models.kandinsky5",),
    "kandinsky5_image": ("nodes.models.kandinsky5",),
    "hunyuan_dit": ("nodes.models.hunyuan_dit",),
    "hunyuan_dit1": ("nodes.models.hunyuan_dit",),
    # HunyuanVideo 1.0: its DiT and text encoders, and its VAE (Kandinsky 5's video templates' too)
    "hunyuan_video": ("nodes.models.hunyuan_video", "nodes.models.hunyuan_video_vae"),
}


def _dispatch(name: str, ref: ModelRef, sd: Any, arch: str):
    """Hand a DiT family's component to that family's helper `name(ref, state_dict)` (Flux's unless listed)."""
    for module_name in _ARCH_MODULES.get(arch, FLUX_MODULES):
        try:
            fn = getattr(importlib.import_module(module_name), name, None)
        except ImportError:
            continue
        if fn is not None:
            return fn(ref, sd)
    raise ModelLoadError(ref.sources[0], f"{arch} models are recognised but {name} is not available for them")


def _sd_arch(info: CheckpointInfo) -> str:
    if info.arch not in LATENTS:
        raise ModelLoadError(info.path, f"architecture {info.arch} has no SD-family loader")
    return info.arch


@lru_cache(maxsize=8)
def model_config(arch: str) -> dict[str, Any]:
    return json.loads((CONFIGS / arch / "model.json").read_text())


def sampling_config(scheduler_json: Path, prediction: str | None, zsnr: bool = False) -> dict[str, Any]:
    """ComfyUI's discrete model-sampling settings from a diffusers scheduler_config.json."""
    cfg = json.loads(scheduler_json.read_text())
    pred = prediction or ("v" if cfg.get("prediction_type") == "v_prediction" else "eps")
    return {
        "kind": "discrete",
        "prediction": pred,
        "beta_schedule": cfg.get("beta_schedule", "scaled_linear"),
        "linear_start": cfg.get("beta_start", 0.00085),
        "linear_end": cfg.get("beta_end", 0.012),
        "timesteps": cfg.get("num_train_timesteps", 1000),
        "zsnr": zsnr,
    }


def _folder_weights(folder: Path) -> dict[str, torch.Tensor]:
    """All tensors of a diffusers/transformers component folder (single or sharded safetensors)."""
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise ModelLoadError(folder, "no .safetensors weights in this folder")
    sd: dict[str, torch.Tensor] = {}
    for f in files:
        sd.update(load_state_dict(f))
    return sd


# ---- diffusion model ------------------------------------------------------------------------------------


@dataclass
class UNetWeights:
    """An ldm UNet's weights in our module's (diffusers) names, patches and merges applied; `names` maps
    them back to the ldm names (without `model.diffusion_model.`) that merge prefixes and saving use."""

    arch: str
    path: str
    sd: dict[str, torch.Tensor]  # the whole source file
    unet_sd: dict[str, torch.Tensor]  # its UNet part, ldm names, as stored
    cfg: dict[str, Any]
    dsd: dict[str, torch.Tensor]
    names: dict[str, str]
    patched: int


def _refuse_merges(ref: ModelRef, path: str, why: str) -> None:
    if merge_mod.merges(ref):
        raise ModelLoadError(path, f"merged models are not supported for {why} yet")


def unet_weights(ref: ModelRef) -> UNetWeights:
    """The UNet weights of an SD1/SD2/SDXL single file, LoRAs and merges applied (merged models load,
    merge and save through this)."""
    path, _ = _source(ref)
    info = probe(path)
    if info.arch in DIT_ARCHS:
        raise ModelLoadError(path, f"merging or saving {info.arch} diffusion models is not supported yet")
    arch = _sd_arch(info)
    if "diffusion_model" not in info.components:
        raise ModelLoadError(path, f"holds no diffusion model (it is a {info.kind} file)")
    if info.kind == "diffusers":
        raise ModelLoadError(path, "merging or saving a diffusers folder is not supported; use a single-file model")
    sd = _sd(ref)
    unet_sd = unet_mod.strip_prefix(sd, info.prefix) if info.prefix else sd
    if not info.prefix:  # a bare UNet: drop what belongs to other components of a mixed file
        unet_sd = {
            k: v for k, v in sd.items() if not k.startswith(("first_stage_model.", "cond_stage_model.", "conditioner."))
        }
    unet_sd = {k: v for k, v in unet_sd.items() if k not in ("v_pred", "ztsnr")}
    if info.layout == "diffusers":  # a bare UNet in diffusers' names: to ldm's, the names merges and saving use
        unet_sd = unet_diffusers.to_ldm(unet_sd)
    layout = unet_mod.infer_layout({k: tuple(v.shape) for k, v in unet_sd.items()}, path)
    cfg = unet_mod.diffusers_config(layout, arch, path)
    mapping = unet_mod.block_map(layout, "class_embedding") if arch in ("lotus", "sd2") else None
    dsd = unet_mod.ldm_to_diffusers(unet_sd, layout, path, mapping)
    names = dict(zip(dsd.keys(), unet_sd.keys()))
    dsd, patched = merge_mod.patch_weights(
        ref, unet_targets(names), dsd, names.__getitem__, lambda other: unet_weights(other).dsd
    )
    return UNetWeights(arch, path, sd, unet_sd, cfg, dsd, names, patched)


def load_diffusion_model(ref: ModelRef) -> DiffusionModel:
    """The UNet (SD1/SD2/SDXL) of a checkpoint, bare UNet file or diffusers folder, LoRAs and merges applied."""
    path, _ = _source(ref)
    info = probe(path)
    if info.arch in DIT_ARCHS:
        _refuse_merges(ref, path, f"{info.arch} diffusion models")
        return _dispatch("load_diffusion_model", ref, _sd(ref), info.arch)
    arch = _sd_arch(info)
    if "diffusion_model" not in info.components:
        raise ModelLoadError(path, f"holds no diffusion model (it is a {info.kind} file)")
    if info.kind == "diffusers":
        _refuse_merges(ref, path, "diffusers folders")
        return _diffusers_unet(ref, Path(path), arch)
    w = unet_weights(ref)
    from diffusers import UNet2DConditionModel

    module = build_module(lambda: UNet2DConditionModel(**w.cfg), w.dsd, path, "UNet")
    pred = unet_mod.prediction_type(arch, w.unet_sd | {k: w.sd[k] for k in ("v_pred",) if k in w.sd})
    sampling = sampling_config(
        CONFIGS / SCHEDULE_OF.get(arch, arch) / "scheduler" / "scheduler_config.json",
        PREDICTION_OF.get(arch, pred if pred == "v" else None),
        zsnr="ztsnr" in w.sd,
    )
    return unet_mod.UNetModel(
        arch=arch,
        module=module,
        latent_format=LATENTS[arch],
        sampling=sampling,
        config={**w.cfg, "patched_weights": w.patched},
    )


def _diffusers_unet(ref: ModelRef, folder: Path, arch: str) -> DiffusionModel:
    from diffusers import UNet2DConditionModel

    sub = folder / "unet"
    cfg = dict(UNet2DConditionModel.load_config(sub))
    dsd = _folder_weights(sub)
    dsd, patched = merge_loras(ref.patches, unet_targets({k: k for k in dsd}), dsd)
    module = build_module(lambda: UNet2DConditionModel.from_config(cfg), dsd, str(sub), "UNet")
    sched = folder / "scheduler" / "scheduler_config.json"
    sampling = sampling_config(
        sched if sched.is_file() else CONFIGS / arch / "scheduler" / "scheduler_config.json", None
    )
    return unet_mod.UNetModel(
        arch=arch,
        module=module,
        latent_format=LATENTS[arch],
        sampling=sampling,
        config={**cfg, "patched_weights": patched},
    )


# ---- VAE ------------------------------------------------------------------------------------------------


def load_vae(ref: ModelRef) -> VAEModel:
    """The VAE of a checkpoint, a VAE file (ldm or diffusers layout) or a diffusers folder; or ComfyUI's
    file-less pixel_space VAE."""
    if ref.arch == "pixel_space":
        from .pixel_space import pixel_space_vae

        return pixel_space_vae()
    path, _ = _source(ref)
    info = probe(path)
    if info.kind == "diffusers":
        return _diffusers_vae(Path(path), info.arch)
    if "vae" not in info.components:
        raise ModelLoadError(path, f"holds no VAE (it is a {info.kind} file)")
    sd = _sd(ref)
    if info.arch in DIT_ARCHS or info.arch in VAE_ARCHS:
        return _dispatch("load_vae", ref, sd, info.arch)
    prefix = info.prefix if info.kind == "vae" else "first_stage_model."
    vsd = unet_mod.strip_prefix(sd, prefix) if prefix else sd
    if not vae_mod.is_diffusers_layout(vsd):
        vsd = vae_mod.ldm_to_diffusers(vsd, path)
    return build_kl_vae(vsd, path, info.arch)


def build_kl_vae(vsd: dict[str, torch.Tensor], path: str, arch: str, cfg: dict[str, Any] | None = None) -> VAEModel:
    from diffusers import AutoencoderKL

    cfg = cfg or vae_mod.diffusers_config(vsd, path)
    module = build_module(lambda: AutoencoderKL(**cfg), vsd, path, "VAE")
    return vae_mod.KLVAE(
        arch=arch,
        module=module,
        latent_channels=cfg["latent_channels"],
        downscale=2 ** (len(cfg["block_out_channels"]) - 1),
    )


def _diffusers_vae(folder: Path, arch: str) -> VAEModel:
    from diffusers import AutoencoderKL

    sub = folder / "vae"
    return build_kl_vae(_folder_weights(sub), str(sub), arch, dict(AutoencoderKL.load_config(sub)))


# ---- text encoders --------------------------------------------------------------------------------------


def vocab_dirs() -> list[Path]:
    """The workspace folders where a user's tokenizer files are looked for (text_encoders, then configs)."""
    from nodes.workspace import active

    ws = active()
    return ws.folder_paths("text_encoders") + ws.folder_paths("configs")


def clip_bpe(vocab_size: int, path: str | None) -> ClipBPE:
    return bpe_for_vocab_size(vocab_size, () if vocab_size == BYTE_VOCAB_SIZE else vocab_dirs(), path)


def load_text_encoder(ref: ModelRef) -> TextEncoder:
    """ComfyUI's CLIP object: from a checkpoint, from CLIPLoader/DualCLIPLoader files (HF or OpenCLIP
    layout) or a diffusers folder. Options: ("layer", -2) = CLIPSetLastLayer; ("clip_type", "sdxl"|...)."""
    path, _ = _source(ref)
    infos = [probe(p) for p in ref.sources]
    clip_type = ref.option("clip_type")
    if infos[0].arch in ("sam3", "sam31"):  # SAM 3's CLIP tower inside its checkpoint
        from nodes.models import sam3_text

        return sam3_text.load_text_encoder(ref, _sd(ref))
    if any(i.arch == "gemma4" for i in infos):
        # ComfyUI's CLIPLoader type ltxv on LTX-2.5's Gemma 4 file with its dual projection (lt.sd_detect).
        from nodes.models import ltx25_text

        sd = _sd(ref)
        if clip_type != "ltxv" or len(ref.sources) != 1:
            raise ModelLoadError(path, "a Gemma 4 file is read here only by CLIPLoader with type ltxv (LTX-2.5's)")
        _refuse_merges(ref, path, "these text encoders")
        if ltx25_text.is_ltx25_text(sd):
            return ltx25_text.load_text_encoder(ref, sd)
        from nodes.models import gemma4_chat  # Gemma 4 alone: the templates' prompt enhancer, for generation

        return gemma4_chat.load_text_encoder(ref, sd)
    if any(i.arch == "gemma3" for i in infos):
        # ComfyUI's LTXAVTextEncoderLoader (CLIPType.LTXV): Gemma 3 with the LTX-2 checkpoint's text side.
        if clip_type != "ltxv" or len(ref.sources) != 2:
            raise ModelLoadError(
                path,
                "a Gemma 3 text encoder is read here only as LTX-2's, with its checkpoint (LTXAVTextEncoderLoader)",
            )
        _refuse_merges(ref, path, "these text encoders")
        return _dispatch("load_text_encoder", ref, [_sd(ref, i) for i in range(2)], "ltx2")
    if any(i.arch == "qwen35" for i in infos):
        # ComfyUI reads a Qwen3.5 file as Qwen3.5 whatever the CLIPLoader type (FLUX 3's prompt upsampler: flux3).
        _refuse_merges(ref, path, "these text encoders")
        return _dispatch("load_text_encoder", ref, [_sd(ref, i) for i in range(len(ref.sources))], "qwen35")
    if any(i.arch == "qwen3vl" for i in infos):
        # ComfyUI: a Qwen3-VL-8B file with CLIPLoader type qwen_image is Qwen-Image 2.1's encoder, a Qwen3-VL-4B
        # one with type krea2 Krea 2's.
        # With type minimax, MiniMax H3's Qwen3-VL-32B (truncated to 50 layers).
        # With type flux3, FLUX 3's Qwen3-VL-4B.
        # With type mage, Mage-Flow's Qwen3-VL-4B.
        if clip_type in ("krea2", "minimax", "flux3", "mage"):
            _refuse_merges(ref, path, "these text encoders")
            return _dispatch(
                "load_text_encoder",
                ref,
                [_sd(ref, i) for i in range(len(ref.sources))],
                {"minimax": "minimax_h3", "mage": "mage_flow"}.get(clip_type, clip_type),
            )
        if clip_type not in (None, "qwen_image"):
            raise ModelLoadError(
                path,
                f"a Qwen3-VL text encoder is read here only as Qwen-Image 2.1's (CLIPLoader "
                f"type qwen_image), Krea 2's (krea2), FLUX 3's (flux3), Mage-Flow's (mage) or MiniMax H3's (minimax), "
                f"not as type "
                f"{clip_type}",
            )
        _refuse_merges(ref, path, "these text encoders")
        return _dispatch("load_text_encoder", ref, [_sd(ref, i) for i in range(len(ref.sources))], "qwen_image21")
    if clip_type == "pixeldit" and any(i.arch == "gemma2" for i in infos):  # PixelDiT's PixelDiTGemma2TE
        _refuse_merges(ref, path, "these text encoders")
        return _dispatch("load_text_encoder", ref, [_sd(ref, i) for i in range(len(ref.sources))], "pixeldit")
    if any(i.arch == "gemma2" for i in infos):  # ComfyUI: a Gemma 2 2B file is Lumina 2's encoder, any type
        _refuse_merges(ref, path, "these text encoders")
        return _dispatch("load_text_encoder", ref, [_sd(ref, i) for i in range(len(ref.sources))], "lumina2")
    if any(i.arch == "mistral3" for i in infos):  # ComfyUI: a Mistral 3 file is FLUX.2 dev's encoder, any type
        _refuse_merges(ref, path, "these text encoders")
        return _dispatch("load_text_encoder", ref, [_sd(ref, i) for i in range(len(ref.sources))], "mistral3")
    if clip_type == "hunyuan_video":  # ComfyUI 0.3.64's DualCLIPLoader type: llava-llama3 + CLIP-L
        _refuse_merges(ref, path, "these text encoders")
        return _dispatch("load_text_encoder", ref, [_sd(ref, i) for i in range(len(ref.sources))], "hunyuan_video")
    if clip_type == "hidream" or len(ref.sources) == 4 or any(i.arch == "llama3" for i in infos):
        # ComfyUI: four files (QuadrupleCLIPLoader), CLIPLoader/DualCLIPLoader type hidream or a Llama 3.1 file
        _refuse_merges(ref, path, "these text encoders")
        return _dispatch("load_text_encoder", ref, [_sd(ref, i) for i in range(len(ref.sources))], "hidream")
    if any(i.arch == "qwen3_06b" for i in infos):  # ComfyUI: a Qwen3 0.6B file is Anima's encoder, any type
        _refuse_merges(ref, path, "these text encoders")
        return _dispatch("load_text_encoder", ref, [_sd(ref, i) for i in range(len(ref.sources))], "anima")
    if any(i.arch == "t5_old" for i in infos):  # ComfyUI: the old T5-XXL is Cosmos' encoder, any type
        _refuse_merges(ref, path, "these text encoders")
        return _dispatch("load_text_encoder", ref, [_sd(ref, i) for i in range(len(ref.sources))], "cosmos_predict2")
    if any(i.arch == "qwen3" for i in infos):
        # ComfyUI: a Qwen3-4B file is Flux2-Klein's encoder for CLIPLoader types flux/flux2, Z-Image's otherwise.
        _refuse_merges(ref, path, "these text encoders")
        arch = "flux2" if clip_type in ("flux", "flux2") else "zimage"
        return _dispatch("load_text_encoder", ref, [_sd(ref, i) for i in range(len(ref.sources))], arch)
    if clip_type == "pixart":  # ComfyUI's CLIPLoader type pixart: the same T5 encoder as chroma's
        _refuse_merges(ref, path, "these text encoders")
        return _dispatch("load_text_encoder", ref, [_sd(ref, i) for i in range(len(ref.sources))], "pixart_sigma")
    if clip_type == "ltxv":  # ComfyUI 0.3.64's CLIPLoader type ltxv: T5-XXL alone with its attention mask
        _refuse_merges(ref, path, "these text encoders")
        return _dispatch("load_text_encoder", ref, [_sd(ref, i) for i in range(len(ref.sources))], "ltxv")
    if clip_type == "mochi":  # ComfyUI 0.3.64's CLIPLoader type mochi: T5-XXL alone, at least 256 tokens
        _refuse_merges(ref, path, "these text encoders")
        return _dispatch("load_text_encoder", ref, [_sd(ref, i) for i in range(len(ref.sources))], "mochi")
    if clip_type == "cogvideox":  # the newest ComfyUI's CLIPLoader type cogvideox: T5-XXL alone, 226 tokens
        _refuse_merges(ref, path, "these text encoders")
        return _dispatch("load_text_encoder", ref, [_sd(ref, i) for i in range(len(ref.sources))], "cogvideox")
    if clip_type == "chroma":  # ComfyUI's CLIPLoader type chroma: T5-XXL alone, PixArt's tokenizer
        _refuse_merges(ref, path, "these text encoders")
        return _dispatch("load_text_encoder", ref, [_sd(ref, i) for i in range(len(ref.sources))], "chroma")
    if clip_type == "wan" or any(i.arch == "umt5" for i in infos):  # ComfyUI's CLIPLoader type wan: umt5-xxl
        _refuse_merges(ref, path, "these text encoders")
        return _dispatch("load_text_encoder", ref, _sd(ref), "wan21")
    if clip_type in ("kandinsky5", "kandinsky5_image"):  # ComfyUI 0.10.0's DualCLIPLoader types: Qwen2.5-VL + CLIP-L
        _refuse_merges(ref, path, "these text encoders")
        return _dispatch("load_text_encoder", ref, [_sd(ref, i) for i in range(len(ref.sources))], "kandinsky5")
    if any(i.arch in ("hunyuan_dit", "hunyuan_dit1") for i in infos):  # a HunyuanDiT checkpoint's BERT and mT5-XL
        _refuse_merges(ref, path, "these text encoders")
        return _dispatch("load_text_encoder", ref, [_sd(ref, i) for i in range(len(ref.sources))], "hunyuan_dit")
    if clip_type == "hunyuan_video_15":  # ComfyUI 0.10.0's DualCLIPLoader type: Qwen2.5-VL and the ByT5 glyph encoder
        _refuse_merges(ref, path, "these text encoders")
        return _dispatch("load_text_encoder", ref, [_sd(ref, i) for i in range(len(ref.sources))], "hunyuan_video15")
    if clip_type == "hunyuan_image":  # ComfyUI's type hunyuan_image: Qwen2.5-VL read with Hunyuan Image's template
        _refuse_merges(ref, path, "these text encoders")
        return _dispatch("load_text_encoder", ref, [_sd(ref, i) for i in range(len(ref.sources))], "hunyuan_image")
    if clip_type == "qwen_image" or any(i.arch in ("qwen25", "qwen_image") for i in infos):
        # ComfyUI: a Qwen2.5-VL-7B file is Qwen-Image's encoder (whatever the CLIPLoader type but hunyuan_image).
        _refuse_merges(ref, path, "these text encoders")
        sds = [_sd(ref, i) for i in range(len(ref.sources))]
        return _dispatch("load_text_encoder", ref, sds if len(sds) > 1 else sds[0], "qwen_image")
    if clip_type == "stable_cascade" or any(i.arch.startswith("stable_cascade") for i in infos):
        # ComfyUI's CLIPType.STABLE_CASCADE / a stage C checkpoint's text_encoder.: CLIP-G alone, masked after end
        _refuse_merges(ref, path, "these text encoders")
        return _dispatch("load_text_encoder", ref, [_sd(ref, i) for i in range(len(ref.sources))], "stable_cascade_c")
    if clip_type in DIT_ARCHS or any(i.arch in DIT_ARCHS + ("t5",) for i in infos):
        _refuse_merges(ref, path, "these text encoders")
        sds = [_sd(ref, i) for i in range(len(ref.sources))]
        arch = (
            "sd3"
            if clip_type == "sd3" or any(i.arch == "sd3" for i in infos)
            else "flux2"
            if clip_type == "flux2" or any(i.arch == "flux2" for i in infos)
            else "flux"
        )
        arch = "zimage" if any(i.arch == "zimage" for i in infos) else arch  # a Z-Image checkpoint's Qwen3
        arch = "lumina2" if any(i.arch == "lumina2" for i in infos) else arch  # a Lumina 2 checkpoint's Gemma 2
        return _dispatch("load_text_encoder", ref, sds if len(sds) > 1 else sds[0], arch)
    if infos[0].kind == "diffusers":
        return _diffusers_text_encoder(ref, Path(path), infos[0].arch)
    arch, specs, towers = _te_towers(ref, infos)
    return _clip_encoder(ref, arch, specs, towers, lambda name, vocab, p: clip_bpe(vocab, p))


def _te_towers(
    ref: ModelRef, infos: list[CheckpointInfo]
) -> tuple[str, list[clip_mod.ClipSpec], dict[str, tuple[dict, str]]]:
    """(arch, tower specs, towers) of a checkpoint's or text-encoder files' SD-family CLIP."""
    first, path = infos[0], ref.sources[0]
    if first.kind == "text_encoder":
        arch, towers = _towers_from_files(ref, infos, ref.option("clip_type"))
    else:
        if "text_encoder" not in first.components:
            raise ModelLoadError(path, f"holds no text encoder (it is a {first.kind} file)")
        arch, sd = _sd_arch(first), _sd(ref)
        if arch == "sdxl" and not any(k.startswith("conditioner.embedders.1.") for k in sd):
            arch = "sdxl_refiner"  # the refiner's checkpoint holds CLIP-G alone, as embedders.0
        towers = _towers_from_checkpoint(sd, arch, path)
    return arch, [clip_mod.ClipSpec(**e) for e in model_config(arch)["text_encoders"]], towers


def text_encoder_weights(ref: ModelRef) -> tuple[str, dict[str, torch.Tensor]]:
    """(arch, {"<side>/<HF key>": tensor}) of an SD-family CLIP from single files, LoRAs and merges
    applied (merging and saving read CLIP weights through this)."""
    infos = [probe(p) for p in ref.sources]
    if ref.option("clip_type") in DIT_ARCHS or any(
        i.kind == "diffusers" or i.arch in DIT_ARCHS + ("t5", "qwen25") for i in infos
    ):
        raise ModelLoadError(
            ref.sources[0],
            "merging or saving this text encoder is not supported yet (SD1/SD2/SDXL CLIP from single files only)",
        )
    arch, specs, towers = _te_towers(ref, infos)
    return arch, _clip_weights(ref, specs, towers)[0]


def _clip_weights(
    ref: ModelRef, specs: list[clip_mod.ClipSpec], towers: dict[str, tuple[dict, str]]
) -> tuple[dict[str, torch.Tensor], int]:
    # One combined dict ("side/key") so a LoRA's te1/te2 names are checked against both towers at once.
    combined = {f"{s.name}/{k}": v for s in specs for k, v in towers[s.name][0].items()}
    targets = LoraTargets(TE_FAMILY, {})
    for s in specs:
        kohya = "lora_te_" if len(specs) == 1 else f"lora_te{specs.index(s) + 1}_"
        peft = "text_encoder." if specs.index(s) == 0 else "text_encoder_2."
        side_targets = clip_targets(list(towers[s.name][0]), kohya, peft)
        targets.names.update({n: f"{s.name}/{k}" for n, k in side_targets.names.items()})
    return merge_mod.patch_weights(
        ref, targets, combined, lambda key: key, lambda other: text_encoder_weights(other)[1]
    )


def _towers_from_checkpoint(sd, arch: str, path: str) -> dict[str, tuple[dict, str]]:
    """{side name: (flattened HF state dict, source path)} of an ldm checkpoint."""
    if arch == "sd1":
        return {"l": (clip_mod.hf_keys(sd, "cond_stage_model.transformer."), path)}
    if arch == "sd2":
        return {"h": (clip_mod.open_clip_to_hf(sd, "cond_stage_model.model."), path)}
    if arch == "sdxl_refiner":
        return {"g": (clip_mod.open_clip_to_hf(sd, "conditioner.embedders.0.model."), path)}
    return {
        "l": (clip_mod.hf_keys(sd, "conditioner.embedders.0.transformer."), path),
        "g": (clip_mod.open_clip_to_hf(sd, "conditioner.embedders.1.model."), path),
    }


def _towers_from_files(ref: ModelRef, infos: list[CheckpointInfo], clip_type: str | None):
    """Text-encoder files: one (SD1 CLIP-L, or SD2 OpenCLIP-H when clip_type is sd2 or the file is OpenCLIP)
    or two (SDXL: the wider one is CLIP-G, as ComfyUI decides by content)."""
    towers = []
    for i, info in enumerate(infos):
        if info.kind != "text_encoder":
            raise ModelLoadError(info.path, f"is a {info.kind} file, not a text encoder")
        sd = _sd(ref, i)
        hf = clip_mod.open_clip_to_hf(sd) if info.layout == "open_clip" else clip_mod.hf_keys(sd)
        towers.append((hf, info.path, info.layout))
    if len(towers) == 1:
        hf, p, layout = towers[0]
        arch = "sd2" if clip_type == "sd2" or layout == "open_clip" else "sd1"
        return arch, {"h" if arch == "sd2" else "l": (hf, p)}
    if len(towers) != 2:
        raise ModelLoadError(infos[0].path, f"{len(towers)} text encoder files given; SDXL takes two")
    width = [t[0].get("embeddings.token_embedding.weight", torch.empty(0, 0)).shape[1] for t in towers]
    l, g = (towers[1], towers[0]) if width[0] > width[1] else (towers[0], towers[1])
    return "sdxl", {"l": (l[0], l[1]), "g": (g[0], g[1])}


def _clip_encoder(
    ref: ModelRef,
    arch: str,
    specs: list[clip_mod.ClipSpec],
    towers: dict[str, tuple[dict, str]],
    tokenizer_for,
    acts: dict[str, str] | None = None,
) -> TextEncoder:
    missing = [s.name for s in specs if s.name not in towers or not towers[s.name][0]]
    if missing:
        raise ModelLoadError(ref.sources[0], f"the {arch} text encoder {'/'.join(missing)} is missing")
    combined, patched = _clip_weights(ref, specs, towers)
    sides, modules = {}, {}
    for s in specs:
        sd = {k.split("/", 1)[1]: v for k, v in combined.items() if k.startswith(s.name + "/")}
        p = towers[s.name][1]
        module = clip_mod.build_clip(sd, (acts or {}).get(s.name, s.hidden_act), p, f"CLIP-{s.name.upper()}")
        vocab = sd["embeddings.token_embedding.weight"].shape[0]
        tok = SDTokenizer(tokenizer_for(s.name, vocab, p), pad_with_end=s.pad_with_end)
        sides[s.name] = clip_mod.ClipSide(module, tok, s)
        modules[s.name] = module
    return clip_mod.ClipTextEncoder(
        arch=arch, modules=modules, layer=ref.option("layer"), sides=sides, patched_weights=patched
    )


def _diffusers_text_encoder(ref: ModelRef, folder: Path, arch: str) -> TextEncoder:
    from transformers import CLIPTextConfig

    specs = [clip_mod.ClipSpec(**e) for e in model_config(arch)["text_encoders"]]
    subs = ["text_encoder", "text_encoder_2"][: len(specs)]
    towers, acts = {}, {}
    for s, sub in zip(specs, subs):
        towers[s.name] = (clip_mod.hf_keys(_folder_weights(folder / sub)), str(folder / sub))
        acts[s.name] = CLIPTextConfig.from_pretrained(folder / sub).hidden_act
    tok_dirs = dict(zip([s.name for s in specs], ["tokenizer", "tokenizer_2"]))

    def tokenizer_for(name: str, vocab: int, p: str) -> ClipBPE:
        from transformers import CLIPTokenizer

        d = folder / tok_dirs[name]
        return ClipBPE(CLIPTokenizer.from_pretrained(d), str(d)) if d.is_dir() else clip_bpe(vocab, p)

    return _clip_encoder(ref, arch, specs, towers, tokenizer_for, acts)


# ---- ControlNet -----------------------------------------------------------------------------------------


def load_controlnet(ref: ModelRef) -> cn_mod.ControlNet:
    """A ControlNet file in ldm (`control_model.*`) layout, or diffusers layout with its config.json."""
    path, _ = _source(ref)
    info = probe(path)
    if info.kind != "controlnet":
        raise ModelLoadError(path, f"is not a ControlNet (it is a {info.kind} file)")
    if info.arch in ("sd3", "qwen_image"):  # DiT ControlNets: their family's module loads them
        return _dispatch("load_controlnet", ref, _sd(ref), info.arch)
    from diffusers import ControlNetModel

    sd = _sd(ref)
    if info.layout == "diffusers" and union_mod.is_union(sd):  # xinsir's union ControlNets: no config.json
        return union_mod.load_union_controlnet(sd, path, ref.option("control_type"))
    if info.layout == "diffusers":
        cfg_file = Path(path).with_name("config.json")
        if not cfg_file.is_file():
            raise ModelLoadError(path, "a diffusers-layout ControlNet needs its config.json beside it")
        cfg = dict(ControlNetModel.load_config(cfg_file.parent))
        dsd = sd
    else:
        csd = unet_mod.strip_prefix(sd, info.prefix) if info.prefix else sd
        shapes = {k: tuple(v.shape) for k, v in csd.items()}
        layout = unet_mod.infer_layout(shapes, path, decoder=False)
        hint = cn_mod.hint_channels(shapes, "")
        cfg = cn_mod.config(layout, info.arch, hint, shapes["input_hint_block.0.weight"][1], path)
        n_convs = sum(1 for k in shapes if k.startswith("input_hint_block.") and k.endswith(".weight"))
        dsd = unet_mod.ldm_to_diffusers(csd, layout, path, cn_mod.ldm_map(layout, n_convs))
    module = build_module(lambda: ControlNetModel.from_config(cfg), dsd, path, "ControlNet")
    return cn_mod.ControlNet(arch=info.arch, module=module, config=dict(cfg))
