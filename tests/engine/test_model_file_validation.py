"""A model file that cannot be used is refused when the prompt is validated, in ComfyUI's node_errors shape
(a custom validation failure naming the node and the input), from the safetensors header alone: a truncated
file, an unknown architecture, the wrong kind of file for the loader, a text encoder without a tokenizer.

The files here are headers with tiny tensors under the real key names: validation never reads weights."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from comfy_bridge.registry import NodeRegistry
from comfy_bridge.validation import validate_prompt
from nodes import model_checks
from nodes.library.sd3 import TripleCLIPLoader
from nodes.loaders import CheckpointLoaderSimple, CLIPLoader, LoraLoader, VAELoader
from nodes.workspace import active

SD1_UNET = "model.diffusion_model.input_blocks.0.0.weight"
SD1_CLIP_EMB = "cond_stage_model.transformer.text_model.embeddings.token_embedding.weight"
VAE_KEYS = ("first_stage_model.encoder.conv_in.weight", "first_stage_model.decoder.conv_in.weight")
T5_KEYS = ("encoder.block.0.layer.0.SelfAttention.q.weight", "encoder.final_layer_norm.weight")


def write(folder: str, name: str, tensors: dict[str, tuple[int, ...]]) -> Path:
    path = active().models_dir / folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file({k: torch.zeros(shape, dtype=torch.float16) for k, shape in tensors.items()}, str(path))
    return path


def sd1_checkpoint(vocab: int = 49408) -> dict[str, tuple[int, ...]]:
    return {SD1_UNET: (4, 4, 3, 3), SD1_CLIP_EMB: (vocab, 1), VAE_KEYS[0]: (4, 3, 3, 3), VAE_KEYS[1]: (4, 4, 3, 3)}


def t5(vocab: int) -> dict[str, tuple[int, ...]]:
    return {"shared.weight": (vocab, 1), **{k: (1, 1) for k in T5_KEYS}}


@pytest.fixture
def registry() -> NodeRegistry:
    class TakeAll:
        @classmethod
        def INPUT_TYPES(cls):
            return {"required": {"value": ("*",)}}

        RETURN_TYPES = ()
        FUNCTION = "run"
        OUTPUT_NODE = True

    model_checks.clear_cache()
    reg = NodeRegistry()
    reg.add_builtin(
        {
            "CheckpointLoaderSimple": CheckpointLoaderSimple,
            "CLIPLoader": CLIPLoader,
            "VAELoader": VAELoader,
            "LoraLoader": LoraLoader,
            "TripleCLIPLoader": TripleCLIPLoader,
            "TakeAll": TakeAll,
        },
        {},
    )
    return reg


async def errors_of(registry, class_type: str, **inputs) -> dict:
    prompt = {
        "1": {"class_type": class_type, "inputs": inputs},
        "2": {"class_type": "TakeAll", "inputs": {"value": ["1", 0]}},
    }
    ok, error, _, node_errors = await validate_prompt(registry, "pid", prompt, None)
    assert ok == (not node_errors)
    return node_errors


def only_reason(node_errors: dict, input_name: str) -> str:
    """The one reason given for node 1, checked to be in ComfyUI's custom validation shape."""
    assert list(node_errors) == ["1"]
    (reason,) = node_errors["1"]["errors"]
    assert reason["type"] == "custom_validation_failed" and reason["message"] == "Custom validation failed for node"
    assert reason["extra_info"] == {"input_name": input_name}
    assert reason["details"].startswith(f"{input_name} - ")
    return reason["details"]


async def test_a_usable_checkpoint_passes(registry):
    write("checkpoints", "sd1.safetensors", sd1_checkpoint())
    assert await errors_of(registry, "CheckpointLoaderSimple", ckpt_name="sd1.safetensors") == {}


async def test_truncated_checkpoint_is_refused(registry):
    path = write("checkpoints", "cut.safetensors", sd1_checkpoint())
    path.write_bytes(path.read_bytes()[:-100])
    details = only_reason(await errors_of(registry, "CheckpointLoaderSimple", ckpt_name="cut.safetensors"), "ckpt_name")
    assert "cut.safetensors: file is truncated" in details


async def test_unknown_architecture_is_refused(registry):
    write("checkpoints", "odd.safetensors", {"some.other.network.weight": (2, 2)})
    details = only_reason(await errors_of(registry, "CheckpointLoaderSimple", ckpt_name="odd.safetensors"), "ckpt_name")
    assert "unknown model architecture" in details


async def test_not_a_safetensors_file_is_refused(registry):
    path = active().models_dir / "checkpoints" / "page.safetensors"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("<html>a download that went wrong</html>")
    details = only_reason(
        await errors_of(registry, "CheckpointLoaderSimple", ckpt_name="page.safetensors"), "ckpt_name"
    )
    assert "not a safetensors file" in details


async def test_wrong_kind_of_file_for_the_loader_is_refused(registry):
    write(
        "checkpoints",
        "lora.safetensors",
        {
            "lora_unet_down_blocks_0_attentions_0_proj_in.lora_down.weight": (4, 8),
            "lora_unet_down_blocks_0_attentions_0_proj_in.lora_up.weight": (8, 4),
        },
    )
    details = only_reason(
        await errors_of(registry, "CheckpointLoaderSimple", ckpt_name="lora.safetensors"), "ckpt_name"
    )
    assert details.endswith("lora.safetensors: is a LoRA (sd1) and holds no diffusion model")
    write("vae", "sd1-as-vae.safetensors", {SD1_UNET: (4, 4, 3, 3)})
    details = only_reason(await errors_of(registry, "VAELoader", vae_name="sd1-as-vae.safetensors"), "vae_name")
    assert details.endswith("is a diffusion model (sd1) and holds no VAE")


async def test_a_checkpoint_in_the_lora_loader_is_refused(registry):
    write("loras", "full.safetensors", sd1_checkpoint())
    prompt = {
        "c": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "full.safetensors"}},
        "1": {
            "class_type": "LoraLoader",
            "inputs": {
                "model": ["c", 0],
                "clip": ["c", 1],
                "lora_name": "full.safetensors",
                "strength_model": 1.0,
                "strength_clip": 1.0,
            },
        },
        "2": {"class_type": "TakeAll", "inputs": {"value": ["1", 0]}},
    }
    write("checkpoints", "full.safetensors", sd1_checkpoint())
    _, _, _, node_errors = await validate_prompt(registry, "pid", prompt, None)
    assert only_reason(node_errors, "lora_name").endswith("is a checkpoint (sd1), not a LoRA")


async def test_text_encoder_without_tokenizer_is_refused_until_one_is_placed(registry):
    write("text_encoders", "umt5.safetensors", t5(250112))
    details = only_reason(
        await errors_of(registry, "CLIPLoader", clip_name="umt5.safetensors", type="sd3"), "clip_name"
    )
    assert "250112 token embeddings and no tokenizer was found" in details
    # Told where, the user places a tokenizer there: the next prompt passes (no server restart).
    tokenizer = active().models_dir / "text_encoders" / "t5_tokenizer" / "tokenizer.json"
    tokenizer.parent.mkdir()
    tokenizer.write_text(json.dumps({"model": {"type": "Unigram", "vocab": [["<pad>", 0.0]]}}))
    assert str(tokenizer) in details
    assert await errors_of(registry, "CLIPLoader", clip_name="umt5.safetensors", type="sd3") == {}


async def test_t5_xxl_and_clip_l_pass_with_the_shipped_vocabularies(registry):
    write("text_encoders", "t5xxl.safetensors", t5(32128))
    write(
        "text_encoders",
        "clip_l.safetensors",
        {
            "text_model.embeddings.token_embedding.weight": (49408, 1),
            "text_model.encoder.layers.0.self_attn.q_proj.weight": (1, 1),
        },
    )
    write(
        "text_encoders",
        "clip_g.safetensors",
        {
            "text_model.embeddings.token_embedding.weight": (49408, 2),
            "text_model.encoder.layers.0.self_attn.q_proj.weight": (2, 2),
        },
    )
    assert (
        await errors_of(
            registry,
            "TripleCLIPLoader",
            clip_name1="clip_l.safetensors",
            clip_name2="clip_g.safetensors",
            clip_name3="t5xxl.safetensors",
        )
        == {}
    )


async def test_checkpoint_whose_clip_vocabulary_is_unknown_is_refused(registry):
    write("checkpoints", "odd-vocab.safetensors", sd1_checkpoint(vocab=1000))
    details = only_reason(
        await errors_of(registry, "CheckpointLoaderSimple", ckpt_name="odd-vocab.safetensors"), "ckpt_name"
    )
    assert "its CLIP text encoder has 1000 token embeddings" in details


async def test_a_rewritten_file_is_probed_again(registry):
    path = write("checkpoints", "changing.safetensors", sd1_checkpoint())
    assert await errors_of(registry, "CheckpointLoaderSimple", ckpt_name="changing.safetensors") == {}
    path.write_bytes(path.read_bytes()[:-100])  # another size: another file version
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    details = only_reason(
        await errors_of(registry, "CheckpointLoaderSimple", ckpt_name="changing.safetensors"), "ckpt_name"
    )
    assert "file is truncated" in details


async def test_hook_and_legacy_loaders_check_their_files_too(registry):
    from nodes.library.hooks import CreateHookLoraModelOnly
    from nodes.library.legacy_loaders import CheckpointLoader

    registry.add_builtin({"CreateHookLoraModelOnly": CreateHookLoraModelOnly, "CheckpointLoader": CheckpointLoader}, {})
    write("loras", "full.safetensors", sd1_checkpoint())
    details = only_reason(
        await errors_of(registry, "CreateHookLoraModelOnly", lora_name="full.safetensors", strength_model=1.0),
        "lora_name",
    )
    assert details.endswith("is a checkpoint (sd1), not a LoRA")
    path = write("checkpoints", "cut.safetensors", sd1_checkpoint())
    path.write_bytes(path.read_bytes()[:-100])
    details = only_reason(
        await errors_of(registry, "CheckpointLoader", config_name="v1-inference.yaml", ckpt_name="cut.safetensors"),
        "ckpt_name",
    )
    assert "file is truncated" in details


def test_validation_checks_import_no_model_code():
    """Validation runs beside compute threads that may be importing transformers/diffusers, whose lazy modules
    break under two importing threads: the checks must not import them."""
    import subprocess
    import sys

    code = (
        "import sys, nodes.model_checks, comfy_bridge.validation; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'transformers', 'diffusers'}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert out.stdout.strip() == "[]"
