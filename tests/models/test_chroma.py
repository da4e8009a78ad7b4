"""Chroma (nodes/models/chroma.py, chroma_text.py): detection from the published layout, its T5-only text encoder
(CLIPLoader type chroma, T5TokenizerOptions) and its transformer, equal to ComfyUI 0.3.64 on the tiny demo files
within 1e-5 (tests/models/fixtures/comfyui_chroma.json, recorded by scripts/record_comfyui_chroma.py)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch

from tests.recorded_tensors import tensor

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


def test_fp8_files_load_as_their_weights_multiplied_out(demo_workspace) -> None:
    """ComfyUI's fp8mixed transformer (Chroma1-HD-fp8mixed: comfy_quant float8_e4m3fn layers with a weight_scale) and
    scaled-fp8 T5 (t5xxl_fp8_e4m3fn_scaled: scale_weight beside each fp8 weight, a scaled_fp8 marker) compute as the
    same files with each weight the product of its fp8 codes and its scale."""
    import json

    from safetensors.torch import load_file, save_file

    from nodes.models.loader import load_diffusion_model, load_text_encoder

    torch.set_num_threads(1)
    folder = demo_workspace.models_dir
    sd = load_file(str(folder / DIT))
    quantized, plain = dict(sd), dict(sd)
    for key in [k for k in sd if k.endswith(".weight") and sd[k].ndim == 2 and "blocks.0." in k]:
        layer = key[: -len("weight")]
        scale = sd[key].abs().max() / 448
        codes = (sd[key] / scale).to(torch.float8_e4m3fn)
        quantized[key], quantized[layer + "weight_scale"] = codes, scale.reshape(())
        quantized[layer + "input_scale"] = torch.tensor(1.0)
        quantized[layer + "comfy_quant"] = torch.tensor(
            list(json.dumps({"format": "float8_e4m3fn"}).encode()), dtype=torch.uint8
        )
        plain[key] = codes.to(torch.float32) * scale
    te = load_file(str(folder / TEXT_ENCODER))
    scaled_te, plain_te = dict(te), dict(te)
    for key in [k for k in te if k.endswith(("q.weight", "wo.weight"))]:
        scale = te[key].abs().max() / 448
        scaled_te[key] = (te[key] / scale).to(torch.float8_e4m3fn)
        scaled_te[key[: -len("weight")] + "scale_weight"] = scale.reshape(())
        plain_te[key] = scaled_te[key].to(torch.float32) * scale
    scaled_te["scaled_fp8"] = torch.empty(0, dtype=torch.float8_e4m3fn)
    names = {}
    for name, tensors in (("q", quantized), ("p", plain), ("tq", scaled_te), ("tp", plain_te)):
        names[name] = folder / "diffusion_models" / f"chroma_fp8_test_{name}.safetensors"
        save_file(tensors, str(names[name]), metadata={"comfy_cluster.config": "flux-tiny"})
    try:
        rel = {k: v.relative_to(folder) for k, v in names.items()}
        models = [load_diffusion_model(ref(demo_workspace, "diffusion_model", rel[n], "chroma")) for n in ("q", "p")]
        x, ctx = torch.randn(1, 16, 6, 6), torch.randn(1, 3, 32)
        with torch.no_grad():
            outs = [m.apply(x, torch.tensor([0.5]), {"context": ctx}) for m in models]
        assert torch.equal(outs[0], outs[1])
        encoders = [
            load_text_encoder(ref(demo_workspace, "text_encoder", rel[n], "chroma", clip_type="chroma"))
            for n in ("tq", "tp")
        ]
        tokens = encoders[0].tokenize("a red cat")
        assert torch.equal(encoders[0].encode(tokens)[0], encoders[1].encode(tokens)[0])
    finally:
        for path in names.values():
            path.unlink()
