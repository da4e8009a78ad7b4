"""MODEL, CLIP and VAE as node packs see them: ComfyUI's ModelPatcher / CLIP / VAE methods on top of a
ModelRef. The proxies are ModelRefs (so core nodes accept what a pack returns); their methods send the
work to the cluster through `runtime().call`, and what cannot be honoured raises UnsupportedFeature
naming the pack, the node and the feature.

Honoured model patches (`model_options`): `sampler_cfg_function`, `sampler_post_cfg_function` and
`sampler_pre_cfg_function`, when their functions can be pickled, because denoise steps run in executor
processes: module-level functions and objects of module-level classes by reference, closures by value
(`transport`, cloudpickle).
"""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable, Mapping
from typing import Any

import torch

from cluster.refs import ModelRef
from cluster.runtime import runtime
from comfy_bridge.packs import transport
from comfy_bridge.packs.origin import UnsupportedAttribute, UnsupportedFeature

HONOURED_OPTIONS = (
    "sampler_cfg_function",
    "sampler_post_cfg_function",
    "sampler_pre_cfg_function",
    "disable_cfg1_optimization",
)


def _sync(coro_fn: Callable[[], Any]) -> Any:
    """Run a runtime call from a pack's synchronous code (worker thread, executor, or a loop thread)."""
    from comfy_bridge.registry import run_coroutine_sync

    return run_coroutine_sync(coro_fn())


def _call(fn: str, ref: ModelRef, inputs: dict, params: dict | None = None) -> dict[str, torch.Tensor]:
    rt = runtime()  # read here: the context does not follow into run_coroutine_sync's thread
    bare = base_ref(ref)
    return _sync(lambda: rt.call(fn, bare, inputs, params or {}))


def base_ref(ref: ModelRef) -> ModelRef:
    """The plain ModelRef of a proxy (what weight caches and ModelFns key on)."""
    return ModelRef(ref.component, ref.arch, ref.sources, ref.digests, ref.patches, ref.options)


class _Proxy(ModelRef):
    """Shared proxy plumbing: extra state kept outside the dataclass fields, preserved by the
    ModelRef helpers that build a new ref."""

    def _state(self) -> dict:
        return {}

    def _adopt(self, other: ModelRef) -> _Proxy:
        new = type(self)(other.component, other.arch, other.sources, other.digests, other.patches, other.options)
        for key, value in self._state().items():
            object.__setattr__(new, key, copy.copy(value))
        return new

    def with_option(self, name: str, value: Any) -> _Proxy:
        return self._adopt(super().with_option(name, value))

    def with_patch(self, patch: Any) -> _Proxy:
        return self._adopt(super().with_patch(patch))

    def clone(self) -> _Proxy:
        return self._adopt(self)

    def is_clone(self, other: Any) -> bool:
        return isinstance(other, ModelRef) and other.key == self.key

    def _add_patch_file(self, call: str, build: Callable[[], tuple]) -> list:
        """ComfyUI's add_patches, in place: the LoRA file `build` writes joins this ref's patches; returns the keys
        patched. Patches a LoRA file cannot carry refuse by name."""
        from comfy_bridge.compat.comfy.lora_patches import NotALoraFilePatch

        try:
            patch, patched = build()
        except NotALoraFilePatch as e:
            raise UnsupportedFeature(f"{call} {e.feature}", e.why) from None
        if patch is not None:
            object.__setattr__(self, "patches", self.patches + (patch,))
        return patched

    def load_model(self, *args: Any, **kwargs: Any) -> None:
        """Weights are made resident by the executors that run this model's ModelFns."""

    def get_sd(self) -> dict[str, torch.Tensor]:
        """The component's weights as stored in its files (read here, on the process that asks)."""
        from comfy_bridge.compat.comfy.utils import load_torch_file

        sd: dict[str, torch.Tensor] = {}
        for path in self.sources:
            sd.update(load_torch_file(path))
        prefixes = _SD_PREFIXES.get(self.component, ())
        if any(k.startswith(prefixes) for k in sd) and prefixes:
            sd = {k: v for k, v in sd.items() if k.startswith(prefixes)}
        return sd

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise UnsupportedAttribute(f"{_KIND.get(self.component, 'model')}.{name}")

    def __reduce__(self) -> tuple:
        # Extra state may hold pack functions: pickled so that the executor imports their pack first.
        fields = (self.component, self.arch, self.sources, self.digests, self.patches, self.options)
        return _rebuild, (type(self), fields, transport.dumps_plain(self._state()))


def _rebuild(cls: type[_Proxy], fields: tuple, state: bytes) -> _Proxy:
    proxy = cls(*fields)
    for key, value in transport.loads_plain(state).items():
        object.__setattr__(proxy, key, value)
    return proxy


_SD_PREFIXES = {
    "diffusion_model": ("model.diffusion_model.",),
    "vae": ("first_stage_model.",),
    "text_encoder": ("cond_stage_model.", "conditioner.", "text_encoders."),
}
_KIND = {"diffusion_model": "MODEL", "text_encoder": "CLIP", "vae": "VAE", "controlnet": "CONTROL_NET"}


class _ModelView:
    """What packs read from `model.model` (ComfyUI's BaseModel): sampling and latent format."""

    def __init__(self, ref: ModelRef) -> None:
        from comfy_bridge.compat.comfy.latent_formats import for_format
        from nodes import arch
        from nodes.sampling.model_sampling import model_sampling_from_config

        self.model_sampling = model_sampling_from_config(arch.sampling_config(ref.arch))
        self.latent_format = for_format(arch.latent_format(ref.arch))
        self.arch = ref.arch
        self._sources = ref.sources
        self._weights: tuple | None = None

    def _read_weights(self) -> tuple:
        from comfy_bridge.compat.comfy.model_state import diffusion_model_state

        if self._weights is None:
            self._weights = diffusion_model_state(self.arch, tuple(self._sources))
        return self._weights

    def state_dict(self) -> Mapping[str, torch.Tensor]:
        """ComfyUI's BaseModel.state_dict(): the network's weights under ComfyUI's names, from the MODEL's files
        (each tensor read when asked for)."""
        return self._read_weights()[0]

    @property
    def model_config(self) -> Any:
        """ComfyUI's model_config as far as packs read it: unet_config (the UNet's block layout)."""
        return self._read_weights()[1]

    def __getattr__(self, name: str) -> Any:
        raise UnsupportedAttribute(f"MODEL.model.{name}", "the diffusion model lives on the executors")


class ModelPatcher(_Proxy):
    """MODEL: clone(), model_options and the sampler patches the cluster honours."""

    def _state(self) -> dict:
        return {"_model_options": self.model_options}

    @property
    def model_options(self) -> dict:
        opts = self.__dict__.get("_model_options")
        if opts is None:
            opts = {"transformer_options": {}}
            object.__setattr__(self, "_model_options", opts)
        return opts

    def _adopt(self, other: ModelRef) -> ModelPatcher:
        new = super()._adopt(other)
        opts = copy.copy(self.model_options)
        opts["transformer_options"] = copy.copy(opts.get("transformer_options", {}))
        for key in ("sampler_post_cfg_function", "sampler_pre_cfg_function"):
            if key in opts:
                opts[key] = list(opts[key])
        object.__setattr__(new, "_model_options", opts)
        return new

    def sampler_patches(self) -> dict[str, Any]:
        """The model_options entries denoise steps honour (what nodes.ksampler passes to them)."""
        return {k: v for k, v in self.model_options.items() if k in HONOURED_OPTIONS and v}

    @property
    def model(self) -> _ModelView:
        return _ModelView(self)

    def get_model_object(self, name: str) -> Any:
        if name in ("model_sampling", "latent_format"):
            return getattr(_ModelView(self), name)
        raise UnsupportedFeature(f"MODEL.get_model_object({name!r})")

    def model_dtype(self) -> torch.dtype:
        return torch.float32

    def _picklable(self, fn: Any, feature: str) -> None:
        try:
            transport.dumps(fn)
        except (pickle.PicklingError, AttributeError, TypeError) as e:
            raise UnsupportedFeature(
                feature, f"the function must be picklable, with all it refers to, to run on the executors ({e})"
            ) from None

    def set_model_sampler_cfg_function(self, fn: Callable, disable_cfg1_optimization: bool = False) -> None:
        self._picklable(fn, "MODEL.set_model_sampler_cfg_function")
        self.model_options["sampler_cfg_function"] = fn
        if disable_cfg1_optimization:
            self.model_options["disable_cfg1_optimization"] = True

    def set_model_sampler_post_cfg_function(self, fn: Callable, disable_cfg1_optimization: bool = False) -> None:
        self._picklable(fn, "MODEL.set_model_sampler_post_cfg_function")
        self.model_options.setdefault("sampler_post_cfg_function", []).append(fn)
        if disable_cfg1_optimization:
            self.model_options["disable_cfg1_optimization"] = True

    def set_model_sampler_pre_cfg_function(self, fn: Callable, disable_cfg1_optimization: bool = False) -> None:
        self._picklable(fn, "MODEL.set_model_sampler_pre_cfg_function")
        self.model_options.setdefault("sampler_pre_cfg_function", []).append(fn)
        if disable_cfg1_optimization:
            self.model_options["disable_cfg1_optimization"] = True

    def add_patches(self, patches: dict, strength_patch: float = 1.0, strength_model: float = 1.0) -> list:
        """ComfyUI's add_patches for LoRA patches (comfy.lora.load_lora's ("lora", (up, down, alpha, ...))) on
        weights of this MODEL's state dict, in place: they are written once as a LoRA file that the executors merge
        at `strength_patch`, as LoraLoader's. Returns the keys patched (those the model has), as ComfyUI."""
        from comfy_bridge.compat.comfy.lora_patches import as_lora_file

        keys = set(self.model.state_dict())
        return self._add_patch_file(
            "MODEL.add_patches", lambda: as_lora_file(patches, strength_patch, strength_model, keys)
        )

    def add_object_patch(self, name: str, obj: Any) -> None:
        raise UnsupportedFeature(f"MODEL.add_object_patch({name!r})")


def _refusing_method(feature: str, why: str) -> Callable:
    def method(self: Any, *args: Any, **kwargs: Any) -> None:
        raise UnsupportedFeature(f"MODEL.{feature}", why)

    method.__name__ = feature
    return method


# ModelPatcher setters whose patches reach inside the diffusion model: refused with a clear error.
UNSUPPORTED_MODEL_SETTERS = (
    "set_model_unet_function_wrapper",
    "set_model_denoise_mask_function",
    "set_model_patch",
    "set_model_patch_replace",
    "set_model_attn1_patch",
    "set_model_attn2_patch",
    "set_model_attn1_replace",
    "set_model_attn2_replace",
    "set_model_attn1_output_patch",
    "set_model_attn2_output_patch",
    "set_model_input_block_patch",
    "set_model_input_block_patch_after_skip",
    "set_model_output_block_patch",
    "set_model_emb_patch",
    "set_model_forward_timestep_embed_patch",
    "set_model_double_block_patch",
    "set_model_post_input_patch",
    "set_model_rope_options",
    "set_model_compute_dtype",
    "add_wrapper",
    "add_callback",
    "add_object_patch_with_key",
    "set_attachments",
    "set_injections",
)
# ModelPatcher's own loading machinery: packs read these at import (to wrap or replace them later).
UNSUPPORTED_MODEL_LOADING = (
    "patch_model",
    "unpatch_model",
    "partially_load",
    "partially_unload",
    "patch_weight_to_device",
    "model_patches_to",
    "pre_run",
    "cleanup",
    "detach",
    "inject_model",
    "eject_model",
)
for _name in UNSUPPORTED_MODEL_SETTERS:
    setattr(
        ModelPatcher,
        _name,
        _refusing_method(_name, "the diffusion model runs on the executors, which do not apply this patch"),
    )
for _name in UNSUPPORTED_MODEL_LOADING:
    setattr(
        ModelPatcher,
        _name,
        _refusing_method(_name, "the diffusion model is loaded, patched and unloaded by the executors that run it"),
    )


class Tokens(dict):
    """What CLIP.tokenize returns: opaque to packs here; the text encoder tokenizes on its executor."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class _TextEncoderView:
    """What packs read from `clip.cond_stage_model` (ComfyUI's SD1/SDXL CLIP model): state_dict() in its names."""

    def __init__(self, ref: ModelRef) -> None:
        self._ref = ref
        self._weights: dict | None = None

    def state_dict(self) -> dict[str, torch.Tensor]:
        from comfy_bridge.compat.comfy.model_state import text_encoder_state

        if self._weights is None:
            self._weights = text_encoder_state(self._ref)
        return self._weights

    def __getattr__(self, name: str) -> Any:
        raise UnsupportedAttribute(f"CLIP.cond_stage_model.{name}", "the text encoder lives on the executors")


class CLIP(_Proxy):
    """CLIP: tokenize / encode_from_tokens(_scheduled) / encode, run as text_encode ModelFns."""

    @property
    def cond_stage_model(self) -> _TextEncoderView:
        return _TextEncoderView(self)

    def add_patches(self, patches: dict, strength_patch: float = 1.0, strength_model: float = 1.0) -> list:
        """ComfyUI's CLIP.add_patches for LoRA patches on the CLIP towers' layers, in place (see
        comfy.lora_patches); returns the keys patched."""
        from comfy_bridge.compat.comfy.lora_patches import as_clip_lora_file

        keys = set(self.cond_stage_model.state_dict())
        towers = sorted({k.split(".")[0] for k in keys}, key=["clip_l", "clip_h", "clip_g"].index)
        return self._add_patch_file(
            "CLIP.add_patches", lambda: as_clip_lora_file(patches, strength_patch, strength_model, towers, keys)
        )

    def tokenize(self, text: str, return_word_ids: bool = False, **kwargs: Any) -> Tokens:
        if return_word_ids:
            raise UnsupportedFeature("CLIP.tokenize(return_word_ids=True)")
        return Tokens(text)

    def _encode(self, tokens: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
        if not isinstance(tokens, Tokens):
            raise UnsupportedFeature(
                "CLIP.encode_from_tokens with hand-made tokens", "pass what CLIP.tokenize returned"
            )
        out = _call("text_encode", self, {}, {"text": tokens.text})
        return out["cond"], out.get("pooled")

    def encode_from_tokens(self, tokens: Any, return_pooled: bool | str = False, return_dict: bool = False) -> Any:
        cond, pooled = self._encode(tokens)
        if return_dict:
            return {"cond": cond, "pooled_output": pooled}
        return (cond, pooled) if return_pooled else cond

    def encode_from_tokens_scheduled(
        self, tokens: Any, unprojected_pooled: bool = False, add_dict: dict | None = None
    ) -> list:
        cond, pooled = self._encode(tokens)
        return [[cond, {"pooled_output": pooled, **(add_dict or {})}]]

    def encode(self, text: str) -> torch.Tensor:
        return self.encode_from_tokens(self.tokenize(text))

    def clip_layer(self, layer_idx: int) -> None:
        raise UnsupportedFeature("CLIP.clip_layer (in place)", "use clip.clone().with_option or CLIPSetLastLayer")

    def load_sd(self, sd: dict, full_model: bool = False) -> None:
        raise UnsupportedFeature("CLIP.load_sd")


class VAE(_Proxy):
    """VAE: decode / encode (tiled too) as vae_decode / vae_encode ModelFns."""

    downscale_ratio = 8
    upscale_ratio = 8

    @property
    def latent_channels(self) -> int:
        from nodes import arch

        return arch.latent_format(self.arch).channels

    def spacial_compression_decode(self) -> int:
        return self.upscale_ratio

    def spacial_compression_encode(self) -> int:
        return self.downscale_ratio

    def decode(self, samples: torch.Tensor, vae_options: dict | None = None) -> torch.Tensor:
        return _call("vae_decode", self, {"latent": samples})["image"]

    def decode_tiled(
        self, samples: torch.Tensor, tile_x: int = 64, tile_y: int = 64, overlap: int = 16, **kwargs: Any
    ) -> torch.Tensor:
        tile = max(tile_x, tile_y) * self.upscale_ratio
        return _call("vae_decode", self, {"latent": samples}, {"tile": tile, "overlap": overlap * self.upscale_ratio})[
            "image"
        ]

    def encode(self, pixels: torch.Tensor) -> torch.Tensor:
        return _call("vae_encode", self, {"pixels": pixels[:, :, :, :3]})["latent"]

    def encode_tiled(self, pixels: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        return self.encode(pixels)


PROXY_TYPES: dict[str, type[_Proxy]] = {"diffusion_model": ModelPatcher, "text_encoder": CLIP, "vae": VAE}


def wrap(value: Any) -> Any:
    """A ModelRef as the proxy of its kind (proxies and other values unchanged)."""
    if isinstance(value, _Proxy) or not isinstance(value, ModelRef):
        return value
    cls = PROXY_TYPES.get(value.component)
    if cls is None:
        return value
    return cls(value.component, value.arch, value.sources, value.digests, value.patches, value.options)


def wrap_inputs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Pack node keyword arguments with ModelRefs (also inside INPUT_IS_LIST lists) as proxies."""
    return {k: [wrap(x) for x in v] if isinstance(v, list) else wrap(v) for k, v in kwargs.items()}
