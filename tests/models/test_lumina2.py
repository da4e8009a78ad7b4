"""Lumina 2 / NetaYume (nodes/models/lumina2.py, lumina2_text.py, gemma2_text.py): detection from ComfyUI's key
layout, the Gemma 2 text encoder and the NextDiT, equal to ComfyUI 0.3.64 on the tiny all-in-one checkpoint within
1e-5 (tests/models/fixtures/comfyui_lumina2.json, recorded by scripts/record_comfyui_lumina2.py)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch

from tests.recorded_tensors import tensor

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_lumina2.json").read_text())
CHECKPOINT = "checkpoints/netayume-lumina-tiny.safetensors"
# The recording script's cases: (seed, latent shape, context rows, timesteps)
CASES = {
    "one": (1, [1, 16, 8, 8], 5, [0.7]),
    "odd_size": (2, [1, 16, 7, 9], 3, [0.3]),
    "batch_two": (3, [2, 16, 6, 8], 4, [0.9, 0.2]),
}


def ref(ws, component: str):
    from nodes.loaders import make_ref

    return make_ref(component, "lumina2", [ws.models_dir / CHECKPOINT])


def test_fixture_was_recorded_on_these_files(demo_workspace) -> None:
    for rel, digest in FIXTURE["files"].items():
        assert hashlib.sha256((demo_workspace.models_dir / rel).read_bytes()).hexdigest() == digest, rel


def test_detection_follows_comfyuis_keys(demo_workspace, tmp_path) -> None:
    from safetensors.torch import load_file, save_file

    from nodes.models.detect import probe

    info = probe(demo_workspace.models_dir / CHECKPOINT)
    assert (info.arch, info.kind, info.prefix) == ("lumina2", "checkpoint", "model.diffusion_model.")
    assert info.components == {"diffusion_model", "text_encoder", "vae"}
    # Z-Image's NextDiT (a bare Linear modulation) stays Z-Image
    assert probe(demo_workspace.models_dir / "diffusion_models/z-image-turbo-tiny.safetensors").arch == "zimage"
    sd = load_file(demo_workspace.models_dir / CHECKPOINT)
    bare = {k[len("model.diffusion_model.") :]: v for k, v in sd.items() if k.startswith("model.diffusion_model.")}
    save_file(bare, str(tmp_path / "lumina_2_model.safetensors"))
    info = probe(tmp_path / "lumina_2_model.safetensors")
    assert (info.arch, info.kind, info.prefix) == ("lumina2", "diffusion_model", "")


def test_text_encoder_equals_comfyui(demo_workspace) -> None:
    from nodes.models.loader import load_text_encoder

    torch.set_num_threads(1)
    te = load_text_encoder(ref(demo_workspace, "text_encoder"))
    for rec in FIXTURE["text"]:
        tokens = te.tokenize(rec["prompt"])
        assert [t for chunk in tokens["gemma2_2b"] for t, _ in chunk] == rec["ids"], rec["prompt"]
        cond, pooled = te.encode(tokens)
        assert pooled is None
        expected = tensor(rec["cond"])
        assert cond.shape == expected.shape
        assert torch.allclose(cond, expected, atol=1e-5, rtol=0), (rec["prompt"], (cond - expected).abs().max())


@pytest.mark.parametrize("case", sorted(CASES))
def test_transformer_equals_comfyui(demo_workspace, case: str) -> None:
    from nodes.models.loader import load_diffusion_model

    torch.set_num_threads(1)
    model = load_diffusion_model(ref(demo_workspace, "diffusion_model"))
    assert model.arch == "lumina2" and model.sampling == {"kind": "flow", "shift": 6.0, "multiplier": 1.0}
    assert (model.config["num_attention_heads"], model.config["num_kv_heads"]) == (2, 1)
    seed, shape, rows, ts = CASES[case]
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g)
    context = torch.randn(1, rows, model.config["cap_feat_dim"], generator=g)
    with torch.no_grad():
        out = model.apply(x, torch.tensor(ts), {"context": context.expand(shape[0], -1, -1)})
    expected = tensor(FIXTURE["cases"][case]["out"])
    assert out.shape == expected.shape
    assert torch.allclose(out, expected, atol=1e-5, rtol=0), (out - expected).abs().max()


def test_gemma_without_its_tokenizer_is_refused_by_name(demo_workspace, tmp_path) -> None:
    from safetensors.torch import load_file, save_file

    from nodes.loaders import make_ref
    from nodes.models.errors import ModelLoadError
    from nodes.models.loader import load_text_encoder

    sd = load_file(demo_workspace.models_dir / CHECKPOINT)
    del sd["text_encoders.spiece_model"]
    path = tmp_path / "no_tokenizer.safetensors"
    save_file(sd, str(path))
    with pytest.raises(ModelLoadError, match="spiece_model"):
        load_text_encoder(make_ref("text_encoder", "lumina2", [path]))


@pytest.mark.parametrize("index", range(len(FIXTURE["lumina2_node"])))
def test_clip_text_encode_lumina2_equals_comfyui(demo_workspace, index: int) -> None:
    """CLIPTextEncodeLumina2 on the checkpoint's CLIP: the user prompt behind each system prompt."""
    import asyncio

    from nodes.library.lumina2 import CLIPTextEncodeLumina2
    from nodes.loaders import CheckpointLoaderSimple

    torch.set_num_threads(1)
    rec = FIXTURE["lumina2_node"][index]
    _, clip, _ = CheckpointLoaderSimple().load_checkpoint("netayume-lumina-tiny.safetensors")
    [(cond, _)] = asyncio.run(CLIPTextEncodeLumina2().encode(clip, rec["user_prompt"], rec["system_prompt"]))[0]
    expected = tensor(rec["cond"])
    assert cond.shape == expected.shape
    assert torch.allclose(cond, expected, atol=1e-5, rtol=0), (cond - expected).abs().max()
    with pytest.raises(ValueError, match="system_prompt"):
        asyncio.run(CLIPTextEncodeLumina2().encode(clip, "a cat", "best"))


@pytest.mark.parametrize("clip_type", ["lumina2", "stable_diffusion"])
def test_bare_gemma2_file_through_cliploader_equals_comfyui(demo_workspace, clip_type: str) -> None:
    """Lumina 2's split files: gemma_2_2b.safetensors (transformers' names under `model.`, the tokenizer as
    `spiece_model`) through CLIPLoader, which ComfyUI reads as Lumina 2's encoder whatever the type."""
    from safetensors.torch import load_file, save_file

    from nodes.loaders import CLIPLoader
    from nodes.models.detect import probe
    from nodes.models.loader import load_text_encoder

    torch.set_num_threads(1)
    sd = load_file(demo_workspace.models_dir / CHECKPOINT)
    prefix = "text_encoders.gemma2_2b.transformer.model."
    bare = {"model." + k[len(prefix) :]: v for k, v in sd.items() if k.startswith(prefix)}
    bare["spiece_model"] = sd["text_encoders.spiece_model"]
    path = demo_workspace.models_dir / "text_encoders" / "gemma_2_2b_tiny_test.safetensors"
    save_file(bare, str(path))
    try:
        assert probe(path).arch == "gemma2"
        (clip,) = CLIPLoader().load_clip(path.name, clip_type)
        te = load_text_encoder(clip)
        rec = FIXTURE["text"][1]
        cond, _ = te.encode(te.tokenize(rec["prompt"]))
        assert torch.allclose(cond, tensor(rec["cond"]), atol=1e-5, rtol=0)
    finally:
        path.unlink()


def test_lora_equals_comfyui(demo_workspace) -> None:
    """LoraLoaderModelOnly with the tiny LoRA (kohya and ComfyUI names, one on the fused qkv) at strength 0.8:
    the NextDiT's output equals ComfyUI 0.3.64's patched model's, and differs from the unpatched one's."""
    from nodes.loaders import CheckpointLoaderSimple, LoraLoaderModelOnly
    from nodes.models.loader import load_diffusion_model

    torch.set_num_threads(1)
    rec = FIXTURE["lora"]
    model, _, _ = CheckpointLoaderSimple().load_checkpoint("netayume-lumina-tiny.safetensors")
    (patched,) = LoraLoaderModelOnly().load_lora_model_only(
        model, "netayume-lumina-tiny-lora.safetensors", rec["strength"]
    )
    net = load_diffusion_model(patched)
    seed, shape, rows, ts = CASES[rec["case"]]
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g)
    context = torch.randn(1, rows, net.config["cap_feat_dim"], generator=g)
    with torch.no_grad():
        out = net.apply(x, torch.tensor(ts), {"context": context})
    expected = tensor(rec["out"])
    assert not torch.allclose(expected, tensor(FIXTURE["cases"][rec["case"]]["out"]), atol=1e-3)
    assert torch.allclose(out, expected, atol=1e-5, rtol=0), (out - expected).abs().max()


def test_loraloader_on_the_clip(demo_workspace, tmp_path) -> None:
    """LoraLoader gives the CLIP the LoRA too: the tiny LoRA (diffusion-model weights only) leaves the conditioning
    ComfyUI's; a LoRA with text-encoder weights is refused by name, not ignored."""
    from safetensors.torch import load_file, save_file

    from nodes.loaders import CheckpointLoaderSimple, LoraLoader
    from nodes.models.errors import ModelLoadError
    from nodes.models.loader import load_text_encoder

    torch.set_num_threads(1)
    model, clip, _ = CheckpointLoaderSimple().load_checkpoint("netayume-lumina-tiny.safetensors")
    _, patched = LoraLoader().load_lora(model, clip, "netayume-lumina-tiny-lora.safetensors", 0.8, 0.8)
    te = load_text_encoder(patched)
    rec = FIXTURE["text"][0]
    assert torch.allclose(te.encode(te.tokenize(rec["prompt"]))[0], tensor(rec["cond"]), atol=1e-5, rtol=0)
    lora = load_file(demo_workspace.models_dir / "loras" / "netayume-lumina-tiny-lora.safetensors")
    lora["lora_te_model_layers_0_mlp_down_proj.lora_down.weight"] = torch.zeros(4, 64)
    lora["lora_te_model_layers_0_mlp_down_proj.lora_up.weight"] = torch.zeros(32, 4)
    name = "netayume-lumina-te-lora-test.safetensors"
    path = demo_workspace.models_dir / "loras" / name
    save_file(lora, str(path))
    try:
        _, patched = LoraLoader().load_lora(model, clip, name, 0.8, 0.8)
        with pytest.raises(ModelLoadError, match="Gemma 2 text encoder"):
            load_text_encoder(patched)
    finally:
        path.unlink()


@pytest.mark.parametrize("index", range(len(FIXTURE["clip_layers"])))
def test_clip_set_last_layer_equals_comfyui(demo_workspace, index: int) -> None:
    """CLIPSetLastLayer on Lumina 2's Gemma: the last layer before the final norm, the first layer, and a layer
    beyond the depth (ComfyUI then takes the normed last output)."""
    from nodes.loaders import CheckpointLoaderSimple, CLIPSetLastLayer
    from nodes.models.loader import load_text_encoder

    torch.set_num_threads(1)
    rec = FIXTURE["clip_layers"][index]
    _, clip, _ = CheckpointLoaderSimple().load_checkpoint("netayume-lumina-tiny.safetensors")
    (clip,) = CLIPSetLastLayer().set_last_layer(clip, rec["layer"])
    te = load_text_encoder(clip)
    cond, _ = te.encode(te.tokenize(rec["prompt"]))
    expected = tensor(rec["cond"])
    assert torch.allclose(cond, expected, atol=1e-5, rtol=0), (rec["layer"], (cond - expected).abs().max())
