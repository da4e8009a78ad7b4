"""Chroma (nodes/models/chroma.py, chroma_text.py): detection from the published layout, its T5-only text encoder
(CLIPLoader type chroma, T5TokenizerOptions) and its transformer, equal to ComfyUI 0.3.64 on the tiny demo files
within 1e-5 (tests/models/fixtures/comfyui_chroma.json, recorded by scripts/record_comfyui_chroma.py)."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_chroma.json").read_text())
DIT = "diffusion_models/chroma_tiny.safetensors"
TEXT_ENCODER = "text_encoders/flux-tiny-t5.safetensors"
# the recording script's cases: (seed, latent shape, context rows, timestep(s), guidance)
CASES = {
    "one": (1, [1, 16, 8, 8], 5, [0.7], 0.0),
    "odd_size": (2, [1, 16, 7, 9], 3, [0.3], 0.0),
    "batch_two": (3, [2, 16, 6, 8], 4, [0.9, 0.2], 0.0),
    "guidance": (4, [1, 16, 8, 6], 6, [0.5], 4.0),
}


def tensor(d: dict) -> torch.Tensor:
    return torch.from_numpy(np.frombuffer(base64.b64decode(d["f32"]), dtype=np.float32).copy()).reshape(d["shape"])


def ref(ws, component: str, rel: str, arch: str, **options):
    from nodes.loaders import make_ref

    return make_ref(component, arch, [ws.models_dir / rel], **options)


def test_fixture_was_recorded_on_these_files(demo_workspace) -> None:
    for rel, digest in FIXTURE["files"].items():
        assert hashlib.sha256((demo_workspace.models_dir / rel).read_bytes()).hexdigest() == digest, rel


def test_detection_follows_comfyuis_keys(demo_workspace, tmp_path) -> None:
    from safetensors.torch import load_file, save_file

    from nodes.models.detect import probe

    info = probe(demo_workspace.models_dir / DIT)
    assert (info.arch, info.kind, info.layout) == ("chroma", "diffusion_model", "bfl")
    assert probe(demo_workspace.models_dir / "diffusion_models/flux-tiny.safetensors").arch == "flux"
    # ComfyUI's prefix for a checkpoint's diffusion model is read as well
    prefixed = tmp_path / "chroma_prefixed.safetensors"
    sd = load_file(str(demo_workspace.models_dir / DIT))
    save_file({"model.diffusion_model." + k: v for k, v in sd.items()}, str(prefixed))
    assert (probe(prefixed).arch, probe(prefixed).prefix) == ("chroma", "model.diffusion_model.")


@pytest.mark.parametrize("index", range(len(FIXTURE["text"])))
def test_text_encoder_equals_comfyuis(demo_workspace, index: int) -> None:
    from nodes.models.loader import load_text_encoder

    torch.set_num_threads(1)
    want = FIXTURE["text"][index]
    options = tuple(sorted(want["options"].items()))
    te = load_text_encoder(
        ref(demo_workspace, "text_encoder", TEXT_ENCODER, "chroma", clip_type="chroma", tokenizer_options=options)
    )
    tokens = te.tokenize(want["prompt"])
    assert tokens["t5xxl"] == [[tuple(p) for p in window] for window in want["tokens"]]
    cond, pooled = te.encode(tokens)
    assert pooled is None and want["pooled"] is None
    expected = tensor(want["cond"])
    assert cond.shape == expected.shape
    torch.testing.assert_close(cond, expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("case", sorted(CASES))
def test_transformer_equals_comfyuis(demo_workspace, case: str) -> None:
    from nodes.models.loader import load_diffusion_model

    torch.set_num_threads(1)
    model = load_diffusion_model(ref(demo_workspace, "diffusion_model", DIT, "chroma"))
    seed, shape, rows, t, guidance = CASES[case]
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g)
    context = torch.randn(1, rows, model.config["joint_attention_dim"], generator=g)
    cond = {"context": context.expand(shape[0], -1, -1)}
    if guidance:
        cond["guidance"] = guidance
    with torch.no_grad():
        out = model.apply(x, torch.tensor(t), cond)
    expected = tensor(FIXTURE["cases"][case]["out"])
    assert out.shape == expected.shape
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=0)


def test_bad_inputs_are_refused_by_name(demo_workspace) -> None:
    from nodes.loaders import CLIPLoader
    from nodes.models.errors import ModelLoadError
    from nodes.models.loader import load_diffusion_model

    with pytest.raises(ValueError, match="CLIPLoader type chroma loads T5-XXL"):
        CLIPLoader().load_clip("flux-tiny-clip_l.safetensors", "chroma")
    model = load_diffusion_model(ref(demo_workspace, "diffusion_model", DIT, "chroma"))
    with pytest.raises(ValueError, match="FluxDisableGuidance"):
        model.apply(
            torch.zeros(1, 16, 4, 4), torch.tensor([0.5]), {"context": torch.zeros(1, 2, 32), "guidance_disabled": True}
        )
    from safetensors.torch import load_file, save_file

    broken = demo_workspace.models_dir / "diffusion_models" / "chroma_extra_key_test.safetensors"
    sd = load_file(str(demo_workspace.models_dir / DIT))
    save_file({**sd, "double_blocks.0.img_mod.lin.weight": torch.zeros(2, 2)}, str(broken))
    try:
        with pytest.raises(
            ModelLoadError, match="unsupported Chroma weights: \\['double_blocks.0.img_mod.lin.weight'\\]"
        ):
            load_diffusion_model(
                ref(demo_workspace, "diffusion_model", broken.relative_to(demo_workspace.models_dir), "chroma")
            )
    finally:
        broken.unlink()
