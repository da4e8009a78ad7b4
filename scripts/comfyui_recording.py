"""What the scripts/record_comfyui_*.py recorders share: they run inside a ComfyUI's own environment at development
time (nothing of ComfyUI is committed) and import this module by name, as a script's own folder is on sys.path.
Only the standard library and torch/numpy are imported at module level: ComfyUI's modules must be imported after
`comfyui_on_cpu`."""

from __future__ import annotations

import base64
import hashlib
import json
import lzma
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import torch


def comfyui_on_cpu(*before: str, flags: tuple[str, ...] = ()) -> None:
    """Set the command line ComfyUI would see (`before`, then --cpu and `flags`) and its parsed cpu flag: ComfyUI
    parses no command line on import unless asked, so the flag is also set on its args (no CUDA here)."""
    sys.argv[1:] = [*before, "--cpu", *flags]
    import comfy.cli_args

    comfy.cli_args.args.cpu = True


# Recorded fixtures are written xz-compressed (`<name>.json.xz`): their base64 float32 shrinks to about half and their
# text to a tenth, and the repository travels whole to the GPU machine (64 MiB with the wheels). xz stores no time or
# file name, so the same data gives the same bytes: a re-recording that changes nothing leaves git clean.
XZ = {"format": lzma.FORMAT_XZ, "check": lzma.CHECK_CRC64, "preset": 9 | lzma.PRESET_EXTREME}


def write_json(path: str | Path, data: Any) -> Path:
    """Write a recorder's fixture as `<name>.json.xz` (a `path` ending in .json gets .xz appended); returns the path
    written. tests/recorded_tensors.py's load_json reads it back."""
    path = Path(path)
    if path.name.endswith(".json"):
        path = path.with_name(path.name + ".xz")
    if not path.name.endswith(".json.xz"):
        raise ValueError(f"a recorded fixture is named <name>.json.xz (or <name>.json), not {path.name}")
    path.write_bytes(lzma.compress(json.dumps(data).encode(), **XZ))
    return path


def load_json(path: str | Path) -> Any:
    """A recorded fixture: `path` as named, or `<path>.xz` where only the compressed one exists; a .xz file is
    decompressed. Both at once is an error: one of them is stale."""
    path = Path(path)
    compressed = path.with_name(path.name + ".xz")
    if path.suffix != ".xz" and compressed.exists():
        if path.exists():
            raise ValueError(f"{path} and {compressed.name} both exist: keep the one recorded last, delete the other")
        path = compressed
    data = path.read_bytes()
    return json.loads(lzma.decompress(data) if path.suffix == ".xz" else data)


# The most values one recorded output keeps: larger outputs keep a strided grid of their positions, so that the
# repository (which travels whole to the GPU machine, 64 MiB with the wheels) stays small; inputs are kept whole.
MAX_RECORDED_VALUES = 32768


def sample_strides(shape: list[int], max_values: int = MAX_RECORDED_VALUES) -> list[int]:
    """Per-dimension strides whose grid of positions holds at most `max_values`: the dimension with the most
    kept positions is thinned first, so every dimension keeps positions across its whole length."""
    strides = [1] * len(shape)

    def kept(i: int) -> int:
        return -(-shape[i] // strides[i])

    while np.prod([kept(i) for i in range(len(shape))], dtype=np.int64) > max_values:
        widest = max(range(len(shape)), key=kept)
        strides[widest] += 1
    return strides


def thinned(array: np.ndarray, max_values: int | None) -> tuple[np.ndarray, dict]:
    """`array` at a strided grid of its positions when it has more than `max_values` values (None: whole), with
    what the record says of it: its full shape, and the strides when thinned (tests/recorded_tensors.py reads it)."""
    meta: dict = {"shape": list(array.shape)}
    if max_values is not None and array.size > max_values:
        strides = sample_strides(list(array.shape), max_values)
        array = array[tuple(slice(None, None, s) for s in strides)]
        meta["stride"] = strides
    return np.ascontiguousarray(array), meta


def b64(t: torch.Tensor, max_values: int | None = None) -> dict:
    """A tensor as the fixtures store it: float32 bytes in base64 with the shape (tests/recorded_tensors.py reads
    it). An output may pass `max_values` (MAX_RECORDED_VALUES) to keep a strided grid of its positions."""
    array, meta = thinned(t.detach().to(torch.float32).cpu().numpy(), max_values)
    return {**meta, "f32": base64.b64encode(array.tobytes()).decode()}


def tiny_t5_in_comfyui(text_encoder: str, vocab: str, tokenizer_module: ModuleType) -> dict:
    """Give ComfyUI's T5-XXL the tiny T5 of `text_encoder`: its config at the file's sizes (8-wide heads), its
    unigram vocabulary (`vocab`, nodes/models/configs/flux-tiny/t5_vocab.json) behind the tokenizer class
    `tokenizer_module` (the ComfyUI text encoder module that names T5TokenizerFast) builds, and T5-XXL told by the
    tiny width instead of 4096. Changes nothing else of ComfyUI; returns the config."""
    import comfy.sd
    import comfy.sd1_clip
    import comfy.utils
    from transformers import T5Tokenizer

    te = comfy.utils.load_torch_file(text_encoder)
    t5 = {
        "d_ff": te["encoder.block.0.layer.1.DenseReluDense.wo.weight"].shape[1],
        "d_kv": 8,
        "d_model": te["shared.weight"].shape[1],
        "dense_act_fn": "gelu_pytorch_tanh",
        "is_gated_act": True,
        "layer_norm_epsilon": 1e-6,
        "model_type": "t5",
        "num_heads": te["encoder.block.0.layer.0.SelfAttention.q.weight"].shape[0] // 8,
        "num_layers": len({k.split(".")[2] for k in te if k.startswith("encoder.block.")}),
        "relative_attention_num_buckets": 32,
        "vocab_size": te["shared.weight"].shape[0],
    }

    class TinyT5Tokenizer:
        """The tiny T5's unigram vocabulary behind the interface ComfyUI's SDTokenizer calls."""

        @classmethod
        def from_pretrained(cls, path, **kwargs):
            return cls()

        def __init__(self):
            with open(vocab) as f:
                self.tok = T5Tokenizer(vocab=[(p, float(s)) for p, s in json.load(f)], extra_ids=0)

        def __call__(self, text):
            return {"input_ids": self.tok(text)["input_ids"]}

        def get_vocab(self):
            return self.tok.get_vocab()

    clip_init = comfy.sd1_clip.SDClipModel.__init__

    def clip_init_tiny(self, *args, textmodel_json_config=None, **kwargs):
        if isinstance(textmodel_json_config, str) and "t5_config_" in textmodel_json_config:
            textmodel_json_config = t5
        clip_init(self, *args, textmodel_json_config=textmodel_json_config, **kwargs)

    comfy.sd1_clip.SDClipModel.__init__ = clip_init_tiny
    tokenizer_module.T5TokenizerFast = TinyT5Tokenizer
    detect_te = comfy.sd.detect_te_model

    def detect_te_tiny(sd):  # ComfyUI tells T5-XXL by its 4096 width; the tiny one stands in for it
        if sd.get("encoder.final_layer_norm.weight", torch.empty(0)).shape[0] == t5["d_model"]:
            return comfy.sd.TEModel.T5_XXL
        return detect_te(sd)

    comfy.sd.detect_te_model = detect_te_tiny
    return t5


def sha256(path: str) -> str:
    """A file's SHA-256, recorded so that a test knows which tiny file the numbers came from."""
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def png_rgb(image: torch.Tensor, max_values: int | None = None) -> dict:
    """What SaveImage writes for one image (255 * image, clipped, truncated to uint8) as {"shape", "u8"}, thinned
    as b64's when `max_values` is given."""
    png = np.clip(255.0 * image.detach().cpu().numpy(), 0, 255).astype(np.uint8)
    array, meta = thinned(png, max_values)
    return {**meta, "u8": base64.b64encode(array.tobytes()).decode()}


def node_classes(*modules: ModuleType) -> dict:
    """ComfyUI's node classes by class_type: nodes.py's and those of `modules` (v1 mappings and v3 io.ComfyNode
    classes, which register by their schema's node_id)."""
    import nodes

    classes = dict(nodes.NODE_CLASS_MAPPINGS)
    for module in modules:
        classes.update(getattr(module, "NODE_CLASS_MAPPINGS", {}))
        for cls in vars(module).values():
            if isinstance(cls, type) and cls.__module__ == module.__name__ and hasattr(cls, "define_schema"):
                classes[cls.define_schema().node_id] = cls
    return classes


def run_node(cls: type, inputs: dict) -> tuple:
    """One node's outputs, for a v1 class (FUNCTION) or a v3 one (execute)."""
    if hasattr(cls, "FUNCTION"):
        return getattr(cls(), cls.FUNCTION)(**inputs)
    out = cls.execute(**inputs)
    return tuple(out.result) if hasattr(out, "result") else out


# (class_type, inputs) -> the node's outputs in place of running it, or None to run it (it may fill inputs first)
Override = Callable[[str, dict], "tuple | None"]


def run_prompt(prompt: dict, classes: dict, override: Override | None = None, max_values: int | None = None) -> dict:
    """An API-format workflow run node by node in dependency order with ComfyUI's node classes, its one SaveImage
    replaced by what it would write: {"prompt", "pngs_rgb": [{"shape", "u8"}, ...]} (thinned as png_rgb's when
    `max_values` is given)."""
    results: dict[str, tuple] = {}

    def run(node_id: str) -> tuple:
        if node_id not in results:
            node = prompt[node_id]
            inputs = {k: run(v[0])[v[1]] if isinstance(v, list) else v for k, v in node["inputs"].items()}
            given = override(node["class_type"], inputs) if override else None
            if node["class_type"] == "SaveImage":
                results[node_id] = (inputs["images"],)
            elif given is not None:
                results[node_id] = given
            else:
                results[node_id] = run_node(classes[node["class_type"]], inputs)
        return results[node_id]

    (save,) = [k for k, v in prompt.items() if v["class_type"] == "SaveImage"]
    return {"prompt": prompt, "pngs_rgb": [png_rgb(im, max_values) for im in run(save)[0]]}


def tiny_anima_in_comfyui(dit_file: str) -> None:
    """Give ComfyUI's Anima the tiny DiT of `dit_file`: its LLM adapter at the file's sizes, and the DiT's block count,
    heads, cross-attention width and AdaLN-LoRA width read from the state dict where ComfyUI's detection fixes them.
    Changes nothing else of ComfyUI."""
    import comfy.ldm.anima.model
    import comfy.model_detection
    import comfy.utils

    dit = comfy.utils.load_torch_file(dit_file)
    adapter_dim = dit["net.llm_adapter.out_proj.weight"].shape[1]
    adapter = {
        "source_dim": dit["net.llm_adapter.blocks.0.cross_attn.k_proj.weight"].shape[1],
        "target_dim": dit["net.llm_adapter.embed.weight"].shape[1],
        "model_dim": adapter_dim,
        "num_layers": len({k.split(".")[3] for k in dit if k.startswith("net.llm_adapter.blocks.")}),
        "num_heads": adapter_dim // dit["net.llm_adapter.blocks.0.self_attn.q_norm.weight"].shape[0],
    }
    llm_adapter = comfy.ldm.anima.model.LLMAdapter
    comfy.ldm.anima.model.LLMAdapter = lambda **kw: llm_adapter(**{**adapter, **kw})
    detect = comfy.model_detection.detect_unet_config

    def detect_tiny(state_dict, key_prefix, metadata=None):
        cfg = detect(state_dict, key_prefix, metadata=metadata)
        if cfg is not None and cfg.get("image_model") == "anima":
            width = cfg["model_channels"]
            cfg["num_blocks"] = len({k.split(".")[1] for k in state_dict if k.startswith(f"{key_prefix}blocks.")})
            cfg["num_heads"] = width // state_dict[f"{key_prefix}blocks.0.self_attn.q_norm.weight"].shape[0]
            cfg["crossattn_emb_channels"] = state_dict[f"{key_prefix}blocks.0.cross_attn.k_proj.weight"].shape[1]
            cfg["adaln_lora_dim"] = state_dict[f"{key_prefix}blocks.0.adaln_modulation_self_attn.1.weight"].shape[0]
        return cfg

    comfy.model_detection.detect_unet_config = detect_tiny
