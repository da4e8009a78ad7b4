"""Anima (nodes/models/anima.py, anima_text.py): detection from the published layout, its Qwen3 0.6B text encoder and
its DiT with the LLM adapter, equal to upstream ComfyUI 0.10.0 on the tiny demo files within 1e-5
(tests/models/fixtures/comfyui_anima.json.xz, recorded by scripts/record_comfyui_anima.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.recorded_tensors import load_json, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_anima.json.xz")
DIT = "diffusion_models/anima_tiny.safetensors"
TEXT_ENCODER = "text_encoders/qwen_3_06b_base_tiny.safetensors"


def ref(ws, component: str, rel: str, arch: str, **options):
    from nodes.loaders import make_ref

    return make_ref(component, arch, [ws.models_dir / rel], **options)


def inputs(seed: int, shape: list[int], rows: int, ids: int, width: int, weighted: bool):
    """The recording script's draws, in its order."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g)
    states = torch.randn(1, rows, width, generator=g)
    t5 = torch.randint(0, 32128, (ids,), generator=g)
    weights = 0.5 + torch.rand(ids, generator=g) if weighted else None
    return x, states, t5, weights


def test_fixture_was_recorded_on_these_files(demo_workspace) -> None:
    import hashlib

    for rel, digest in FIXTURE["files"].items():
        assert hashlib.sha256((demo_workspace.models_dir / rel).read_bytes()).hexdigest() == digest, rel


def test_detection_follows_comfyuis_keys_and_widths(demo_workspace, tmp_path) -> None:
    from safetensors.torch import save_file

    from nodes.loaders import CLIPLoader
    from nodes.models.detect import probe

    info = probe(demo_workspace.models_dir / DIT)
    assert (info.arch, info.kind, info.prefix) == ("anima", "diffusion_model", "net.")
    assert probe(demo_workspace.models_dir / TEXT_ENCODER).arch == "qwen3_06b"
    assert probe(demo_workspace.models_dir / "text_encoders/qwen_3_4b-tiny.safetensors").arch == "qwen3"
    # ComfyUI's rule for real files: a Qwen3 1024 wide is the 0.6B, whatever its metadata
    real = tmp_path / "qwen_3_06b_base.safetensors"
    keys = ("model.layers.0.self_attn.q_norm.weight", "model.layers.0.post_attention_layernorm.weight")
    save_file({k: torch.zeros(1024 if "post" in k else 128) for k in keys}, str(real))
    assert probe(real).arch == "qwen3_06b"
    # a Predict2 file without the adapter is not Anima (Cosmos Predict2 itself is not supported)
    plain = tmp_path / "cosmos.safetensors"
    save_file({"net.blocks.0.mlp.layer1.weight": torch.zeros(4, 2)}, str(plain))
    with pytest.raises(Exception, match="unknown model architecture"):
        probe(plain)
    for clip_type in ("stable_diffusion", "lumina2"):  # ComfyUI reads the 0.6B as Anima's, whatever the type
        (clip,) = CLIPLoader().load_clip("qwen_3_06b_base_tiny.safetensors", clip_type)
        assert clip.arch == "anima"


def test_text_encoder_equals_comfyuis(demo_workspace) -> None:
    from nodes.models.loader import load_text_encoder

    torch.set_num_threads(1)
    te = load_text_encoder(ref(demo_workspace, "text_encoder", TEXT_ENCODER, "anima", clip_type="stable_diffusion"))
    for prompt, want in FIXTURE["text"].items():
        tokens = te.tokenize(prompt)
        cond, pooled = te.encode(tokens)
        extras = te.extras(tokens)
        assert pooled is None
        assert extras["t5xxl_ids"].tolist() == want["t5xxl_ids"], prompt
        assert extras["t5xxl_weights"].tolist() == pytest.approx(want["t5xxl_weights"]), prompt
        expected = tensor(want["cond"])
        assert cond.shape == expected.shape, prompt
        if prompt == "":
            # <|endoftext|> alone is fully masked: ComfyUI 0.10.0's attention gives NaN (every image of such a
            # prompt is NaN there); here the token attends to itself, so the conditioning stays finite
            assert expected.isnan().all() and cond.isfinite().all()
            continue
        torch.testing.assert_close(cond, expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("case", sorted(FIXTURE["cases"]))
def test_adapter_and_transformer_equal_comfyuis(demo_workspace, case: str) -> None:
    from nodes.models.anima import adapter_context
    from nodes.models.loader import load_diffusion_model

    torch.set_num_threads(1)
    model = load_diffusion_model(ref(demo_workspace, "diffusion_model", DIT, "anima"))
    seed, shape, rows, ids, t, weighted = {
        "one": (1, [1, 16, 1, 8, 8], 7, 5, 0.7, False),
        "weighted_odd_size": (2, [1, 16, 1, 6, 10], 4, 9, 0.3, True),
        "batch_two": (3, [2, 16, 1, 8, 6], 6, 3, 0.95, False),
    }[case]
    x, states, t5, weights = inputs(seed, shape, rows, ids, model.config["adapter"]["source_dim"], weighted)
    want = FIXTURE["cases"][case]
    with torch.no_grad():
        context = adapter_context(model.module, states, t5[None], None if weights is None else weights[None])
        cond = {"context": states, "t5xxl_ids": t5[None], "t5xxl_weights": None if weights is None else weights[None]}
        out = model.apply(x, torch.tensor([t] * shape[0]), cond)
    torch.testing.assert_close(context, tensor(want["context"]), atol=1e-5, rtol=0)
    expected = tensor(want["out"])
    assert out.shape == expected.shape
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=0)


def test_missing_t5_ids_are_refused_by_name(demo_workspace) -> None:
    from nodes.models.loader import load_diffusion_model

    model = load_diffusion_model(ref(demo_workspace, "diffusion_model", DIT, "anima"))
    with pytest.raises(ValueError, match="T5 token ids"):
        model.apply(torch.zeros(1, 16, 1, 4, 4), torch.tensor([0.5]), {"context": torch.zeros(1, 3, 32)})
