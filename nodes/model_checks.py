"""Model files that cannot be used, found when a prompt is validated instead of seconds into its run.

A loader class lists its file inputs in `MODEL_FILE_INPUTS` ({input name: (models folder, what the loader
needs)}); `model_file_problem` answers, from the file's safetensors header alone (never its weights), why the
named file cannot serve: not a weights file or cut short, an unknown architecture, the wrong kind of file for
the loader (a LoRA in a checkpoint loader), or a text encoder whose tokenizer is not available. What the
header says is cached per file version (path, size, mtime); tokenizer files are looked for each time. What a
header cannot tell (pickled .ckpt files, LoRA formats the detector does not name) is left to the loader.
Nothing here imports transformers or diffusers: validation runs beside compute threads that may be importing
them, and their lazy modules break when two threads import them at once."""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any

from nodes.models.detect import classify, probe
from nodes.models.errors import ModelLoadError
from nodes.models.flux_configs import config_for_sources
from nodes.models.safetensors_io import is_torch_pickle, shapes_of
from nodes.models.t5_tokenizer import t5_tokenizer_candidates
from nodes.models.tokenizer import BYTE_VOCAB_SIZE, OPENAI_VOCAB_SIZE
from nodes.workspace import active

# What a loader input needs: a component the file must provide, or "lora".
NEEDS_LABEL = {
    "diffusion_model": "a diffusion model",
    "vae": "a VAE",
    "text_encoder": "a text encoder",
    "controlnet": "a ControlNet",
    "lora": "a LoRA",
}
KNOWN_CLIP_VOCABS = (BYTE_VOCAB_SIZE, OPENAI_VOCAB_SIZE)
# ByT5's token tables (the plain byte-level one, Hunyuan Image's glyph encoder's): its ids are the bytes, so it needs
# no tokenizer file.
BYT5_VOCABS = (384, 1510)
KIND_LABEL = {
    "checkpoint": "a checkpoint",
    "diffusion_model": "a diffusion model",
    "vae": "a VAE",
    "text_encoder": "a text encoder",
    "controlnet": "a ControlNet",
    "lora": "a LoRA",
    "diffusers": "a diffusers folder",
}


def model_file_problem(obj_class: type, input_name: str, value: Any) -> str | None:
    """Why the model file `value` given to `input_name` of a loader class cannot be used, or None."""
    spec = getattr(obj_class, "MODEL_FILE_INPUTS", {}).get(input_name)
    if spec is None or not isinstance(value, str):
        return None
    folder, needs = spec
    path = active().full_path(folder, value)
    if path is None:
        return None  # the file list check reports names that are not there
    try:
        st = os.stat(path)
    except OSError as e:
        return f"{value}: cannot be read ({e.strerror})"
    problem = _file_problem(str(path), st.st_size, st.st_mtime_ns, needs)
    return None if problem is None else f"{value}: {problem}"


@lru_cache(maxsize=512)
def _file_facts(path: str, size: int, mtime_ns: int) -> tuple[Any, dict[str, int]] | str:
    """(CheckpointInfo, token-embedding rows by kind) from the header, or the reason it cannot be read."""
    try:
        if os.path.isdir(path):  # a diffusers folder: its model_index.json
            info, shapes = probe(path), {}
        else:
            shapes, metadata = shapes_of(path)
            info = classify(shapes, path, metadata)
    except ModelLoadError as e:
        return e.problem
    vocab: dict[str, int] = {}
    clip_rows = [s[0] for k, s in shapes.items() if k.endswith("token_embedding.weight")]
    if clip_rows:
        vocab["clip"] = next((r for r in clip_rows if r not in KNOWN_CLIP_VOCABS), clip_rows[0])
    carries_spiece = info.arch in ("umt5", "hunyuan_dit", "hunyuan_dit1")
    if any(k.endswith("encoder.final_layer_norm.weight") for k in shapes) and not carries_spiece:
        # (umT5 files carry their SentencePiece model: Wan's umt5_xxl, whose loader refuses one without it; so do
        # HunyuanDiT checkpoints for their mT5-XL)
        t5 = next((s for k, s in shapes.items() if k.endswith(("encoder.embed_tokens.weight", "shared.weight"))), None)
        if t5 is not None and t5[0] not in BYT5_VOCABS:
            vocab["t5"] = t5[0]
    if "t5" in vocab:
        try:
            if config_for_sources((path,))[1].get("t5", {}).get("vocab"):
                del vocab["t5"]  # a demo model whose own vocabulary its metadata names
        except (ModelLoadError, OSError, ValueError) as e:
            return getattr(e, "problem", str(e))
    return info, vocab


def _file_problem(path: str, size: int, mtime_ns: int, needs: str) -> str | None:
    if is_torch_pickle(path):
        return None  # a pickle tells nothing without being loaded
    facts = _file_facts(path, size, mtime_ns)
    if isinstance(facts, str):
        if needs == "lora" and "unknown model architecture" in facts:
            return None  # LoRA formats the detector does not name are the LoRA loader's to judge
        return facts
    info, vocab = facts
    if needs == "lora":
        return None if info.kind == "lora" else f"is {KIND_LABEL.get(info.kind, info.kind)} ({info.arch}), not a LoRA"
    if needs not in info.components:
        return f"is {KIND_LABEL.get(info.kind, info.kind)} ({info.arch}) and holds no {NEEDS_LABEL[needs][2:]}"
    if "text_encoder" in info.components and needs in ("text_encoder", "diffusion_model"):
        if info.arch in ("hunyuan_dit", "hunyuan_dit1"):  # its BERT's vocabulary is the user's file
            from nodes.models.hunyuan_dit_text import vocab_problem

            return vocab_problem(path)
        return tokenizer_problem(path, vocab)
    return None


def tokenizer_problem(path: str, vocab: dict[str, int]) -> str | None:
    """Why a file's CLIP or T5 text encoder (token-embedding rows `vocab`) would find no tokenizer. Not cached:
    a tokenizer file the user places after being told where is seen on the next prompt."""
    if "clip" in vocab and vocab["clip"] not in KNOWN_CLIP_VOCABS:
        return (
            f"its CLIP text encoder has {vocab['clip']} token embeddings; only the OpenAI CLIP vocabulary "
            f"({OPENAI_VOCAB_SIZE}) and the byte-level one ({BYTE_VOCAB_SIZE}) are known"
        )
    if "t5" not in vocab:
        return None
    candidates = t5_tokenizer_candidates(path, vocab["t5"])
    if any(c.is_file() for c in candidates):
        return None
    return (
        f"its T5 text encoder has {vocab['t5']} token embeddings and no tokenizer was found for it: put its "
        f"tokenizer.json at {' or '.join(str(c) for c in candidates)}"
    )


def clear_cache() -> None:
    """Forget every file's header facts (tests that rewrite a file within one mtime tick use it)."""
    _file_facts.cache_clear()
