"""PixelDiT (nodes/models/pixeldit.py, nodes/models/pixeldit_text.py): detection from the published layout
(`core.` names, each PiT block's adaLN fused), the pixel-space transformer and the Gemma 2 text encoder with
PixelDiT's preamble, padding and position selection, equal on the tiny demo files within 1e-5 to the newest
ComfyUI's PixelDiT code run at development time (tests/models/fixtures/comfyui_pixeldit.json.xz, recorded by
scripts/record_comfyui_pixeldit.py)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch

from tests.models.test_chroma import ref, tensor
from tests.recorded_tensors import load_json

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_pixeldit.json.xz")
DIT = "diffusion_models/pixeldit_tiny.safetensors"
TEXT_ENCODER = "text_encoders/gemma_2_2b_it_elm_tiny.safetensors"
# the recording script's cases: (seed, pixel shape, context rows, timesteps in model units)
CASES = {
    "one": (1, [1, 3, 32, 48], 300, [700.0]),
    "short_context": (2, [1, 3, 48, 32], 7, [300.0]),
    "batch_two": (3, [2, 3, 32, 32], 300, [900.0, 200.0]),
    "odd_size": (4, [1, 3, 40, 23], 300, [500.0]),
}


def test_fixture_was_recorded_on_these_files(demo_workspace) -> None:
    for rel, digest in FIXTURE["files"].items():
        assert hashlib.sha256((demo_workspace.models_dir / rel).read_bytes()).hexdigest() == digest, rel


def test_detection_follows_comfyuis_keys(demo_workspace) -> None:
    from nodes.models.detect import probe

    info = probe(demo_workspace.models_dir / DIT)
    assert (info.arch, info.kind, info.prefix) == ("pixeldit", "diffusion_model", "core.")
    assert probe(demo_workspace.models_dir / TEXT_ENCODER).arch == "gemma2"


@pytest.mark.parametrize("case", sorted(CASES))
def test_model_equals_comfyuis(demo_workspace, case: str) -> None:
    from nodes.models.loader import load_diffusion_model

    torch.set_num_threads(1)
    model = load_diffusion_model(ref(demo_workspace, "diffusion_model", DIT, "pixeldit"))
    assert model.sampling == {"kind": "flow", "shift": 4.0, "multiplier": 1000.0}
    seed, shape, rows, t = CASES[case]
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g)
    context = torch.randn(1, rows, model.config["text_dim"], generator=g).expand(shape[0], -1, -1)
    with torch.no_grad():
        out = model.apply(x, torch.tensor(t), {"context": context})
    expected = tensor(FIXTURE["cases"][case]["out"])
    assert out.shape == expected.shape
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=0)


def test_text_encoder_equals_comfyuis(demo_workspace) -> None:
    from nodes.models.loader import load_text_encoder

    torch.set_num_threads(1)
    clip = load_text_encoder(ref(demo_workspace, "text_encoder", TEXT_ENCODER, "pixeldit", clip_type="pixeldit"))
    for rec in FIXTURE["text"]:
        tokens = clip.tokenize(rec["prompt"])
        assert [t for t, _ in tokens["gemma2_2b"][0]] == rec["ids"], rec["prompt"]
        cond, pooled = clip.encode(tokens)
        assert pooled is None
        torch.testing.assert_close(cond, tensor(rec["cond"]), atol=1e-5, rtol=0, msg=rec["prompt"])


def test_the_gemma_file_is_lumina2s_for_other_clip_types(demo_workspace) -> None:
    from nodes.loaders import CLIPLoader

    (pixeldit,) = CLIPLoader().load_clip("gemma_2_2b_it_elm_tiny.safetensors", "pixeldit")
    (lumina2,) = CLIPLoader().load_clip("gemma_2_2b_it_elm_tiny.safetensors", "lumina2")
    assert (pixeldit.arch, lumina2.arch) == ("pixeldit", "lumina2")
    with pytest.raises(ValueError, match="type pixeldit loads Gemma 2"):
        CLIPLoader().load_clip("flux-tiny-t5.safetensors", "pixeldit")


def test_pid_files_are_refused_by_name(demo_workspace) -> None:
    from safetensors.torch import load_file, save_file

    from nodes.models.errors import ModelLoadError
    from nodes.models.loader import load_diffusion_model

    broken = demo_workspace.models_dir / "diffusion_models" / "pixeldit_pid_test.safetensors"
    sd = load_file(str(demo_workspace.models_dir / DIT))
    sd["core.lq_proj.latent_proj.0.weight"] = torch.zeros(4, 16, 3, 3)
    save_file(sd, str(broken))
    try:
        with pytest.raises(ModelLoadError, match="PiD"):
            load_diffusion_model(
                ref(demo_workspace, "diffusion_model", broken.relative_to(demo_workspace.models_dir), "pixeldit")
            )
    finally:
        broken.unlink()
