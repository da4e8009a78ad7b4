"""HiDream (nodes/models/hidream.py, hidream_text.py): detection from the published layout, the MoE transformer
(I1, and E1's image joined along the width) and the four text encoders, equal to ComfyUI 0.3.64 on the tiny
demo files within 1e-5 (tests/models/fixtures/comfyui_hidream.json.xz, recorded by
scripts/record_comfyui_hidream.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.recorded_tensors import load_json, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_hidream.json.xz")
DIT = "diffusion_models/hidream_i1_tiny.safetensors"
TEXT_FILES = (
    "text_encoders/hidream_tiny_clip_l.safetensors",
    "text_encoders/hidream_tiny_clip_g.safetensors",
    "text_encoders/hidream_tiny_t5xxl.safetensors",
    "text_encoders/llama_3.1_8b_instruct_tiny.safetensors",
)


def make(ws, component: str, rels, arch: str, **options):
    from nodes.loaders import make_ref

    return make_ref(component, arch, [ws.models_dir / r for r in rels], **options)


@pytest.fixture(scope="module")
def dit(demo_workspace):
    from nodes.models.loader import load_diffusion_model

    return load_diffusion_model(make(demo_workspace, "diffusion_model", [DIT], "hidream"))


@pytest.fixture(scope="module")
def text_encoder(demo_workspace):
    from nodes.models.loader import load_text_encoder

    return load_text_encoder(make(demo_workspace, "text_encoder", TEXT_FILES, "hidream", clip_type="hidream"))


def test_detection_follows_comfyuis_keys(demo_workspace, tmp_path) -> None:
    from safetensors.torch import save_file

    from nodes.models.detect import probe
    from nodes.models.errors import ModelLoadError

    info = probe(demo_workspace.models_dir / DIT)
    assert (info.arch, info.kind, info.prefix) == ("hidream", "diffusion_model", "")
    assert probe(demo_workspace.models_dir / TEXT_FILES[3]).arch == "llama3"
    # a Gemma 2 (Lumina 2's encoder) also has post-attention norms: it is not read as a Llama
    gemma = tmp_path / "gemma.safetensors"
    keys = ("model.embed_tokens.weight", "model.layers.0.post_attention_layernorm.weight")
    save_file({k: torch.zeros(4) for k in (*keys, "model.layers.0.post_feedforward_layernorm.weight")}, str(gemma))
    try:
        assert probe(gemma).arch != "llama3"
    except ModelLoadError:
        pass  # not a model this project reads: refused by name, not taken for HiDream's Llama
    prefixed = tmp_path / "hidream_prefixed.safetensors"
    from safetensors.torch import load_file

    save_file(
        {"model.diffusion_model." + k: v for k, v in load_file(demo_workspace.models_dir / DIT).items()}, prefixed
    )
    assert probe(prefixed).prefix == "model.diffusion_model."


def test_config_from_shapes_is_comfyuis(dit) -> None:
    ours, theirs = dit.config, FIXTURE["dit"]["config"]
    assert ours["llama_layers"] == theirs["llama_layers"]
    assert list(ours["axes_dims_rope"]) == theirs["axes_dims_rope"]
    for key in ("attention_head_dim", "num_attention_heads", "caption_channels", "text_emb_dim", "num_layers"):
        assert ours[key] == theirs[key], key
    assert dit.sampling == {"kind": "flow", "shift": 1.0, "multiplier": 1000}


@pytest.mark.parametrize("name", sorted(FIXTURE["dit"]["cases"]))
def test_transformer_equals_comfyui(dit, name: str) -> None:
    torch.set_num_threads(1)
    case, cfg = FIXTURE["dit"]["cases"][name], FIXTURE["dit"]["config"]
    g = torch.Generator().manual_seed(case["seed"])  # the recorder's draws, in its order
    shape = case["shape"]
    x = torch.randn(shape, generator=g)
    y = torch.randn(shape[0], cfg["text_emb_dim"], generator=g)
    context = torch.randn(shape[0], case["t5_rows"], cfg["caption_channels"][0], generator=g)
    states = len(set(cfg["llama_layers"]))
    llama = torch.randn(shape[0], states, case["llama_rows"], cfg["caption_channels"][1], generator=g)
    cond = {"context": context, "pooled": y, "conditioning_llama3": llama}
    if case["image_cond"]:
        cond["concat"] = torch.randn(shape, generator=g)
    with torch.no_grad():
        out = dit.apply(x, torch.tensor(case["timesteps"]), cond)
    expected = tensor(case["out"])
    assert out.shape == expected.shape
    assert (out - expected).abs().max().item() < 1e-5


@pytest.mark.parametrize("name", sorted(FIXTURE["denoised"]))
def test_denoised_prediction_equals_comfyui_hidream_model(dit, name: str) -> None:
    """The model as the sampler sees it (input scaling, sigma * 1000 as the timestep, the negated flow output ->
    denoised) at ModelSamplingSD3's shift, and E1's raw image latent put in model space, against ComfyUI's
    model_base.HiDream on the same weights."""
    from nodes.sampling.model_sampling import model_sampling_from_config

    torch.set_num_threads(1)
    case, cfg = FIXTURE["denoised"][name], FIXTURE["dit"]["config"]
    g = torch.Generator().manual_seed(case["seed"])  # the recorder's draws (dit_inputs), in its order
    shape = case["shape"]
    x = torch.randn(shape, generator=g)
    y = torch.randn(shape[0], cfg["text_emb_dim"], generator=g)
    context = torch.randn(shape[0], 5, cfg["caption_channels"][0], generator=g)
    llama = torch.randn(shape[0], len(set(cfg["llama_layers"])), 4, cfg["caption_channels"][1], generator=g)
    cond = {"context": context, "pooled": y, "conditioning_llama3": llama}
    if case["image"]:
        cond["concat"] = dit.concat_image(torch.randn(shape, generator=g), x)
    ms = model_sampling_from_config({**dit.sampling, "shift": case["shift"]})
    sigma = torch.tensor([case["sigma"]])
    with torch.no_grad():
        out = dit.apply(ms.calculate_input(sigma, x), ms.timestep(sigma), cond)
    denoised = ms.calculate_denoised(sigma, out, x)
    assert (denoised - tensor(case["denoised"])).abs().max().item() < 1e-5


def test_missing_llama_states_are_named(dit) -> None:
    x = torch.zeros(1, 16, 4, 4)
    with pytest.raises(ValueError, match="Llama"):
        dit.apply(x, torch.tensor([500.0]), {"context": torch.zeros(1, 4, 4096), "pooled": torch.zeros(1, 80)})


@pytest.mark.parametrize("name", sorted(FIXTURE["text"]))
def test_text_encoding_equals_comfyui(demo_workspace, text_encoder, name: str) -> None:
    from nodes.models.loader import load_text_encoder

    torch.set_num_threads(1)
    case = FIXTURE["text"][name]
    te = text_encoder
    if case["tokens"].get("drop"):  # ComfyUI's encoder built without T5 and the Llama: the CLIP files alone
        te = load_text_encoder(make(demo_workspace, "text_encoder", TEXT_FILES[:2], "hidream", clip_type="hidream"))
    tokens = {k: [[(int(t), float(w)) for t, w in c] for c in v] for k, v in case["tokens"].items() if k != "drop"}
    cond, pooled = te.encode(tokens)
    llama = te.extras(tokens)["conditioning_llama3"]
    assert list(cond.shape) == case["cond_shape"] and list(llama.shape) == case["llama_shape"]
    assert (pooled - tensor(case["pooled"])).abs().max().item() < 1e-5
    assert (cond[..., :64] - tensor(case["cond_head"])).abs().max().item() < 1e-5
    assert (cond.double().sum(-1) - tensor(case["cond_row_sums"]).double()).abs().max().item() < 1e-4
    if case["llama_zeros"]:
        assert not llama.any()
    else:
        assert (llama - tensor(case["llama"])).abs().max().item() < 1e-5


def test_tokens_follow_comfyuis_rules(text_encoder) -> None:
    tokens = text_encoder.tokenize("hello world")
    llama = tokens["llama"]
    assert len(llama) == 1 and len(llama[0]) == 128  # ComfyUI's min_length 128, one window
    assert [t for t, _ in llama[0][:3]] == [128000, 15339, 1917]  # <|begin_of_text|>, Llama 3's "hello", " world"
    assert {t for t, _ in llama[0][3:]} == {128009}  # padded with <|eot_id|>
    assert len(tokens["t5xxl"]) == 1 and len(tokens["t5xxl"][0]) == 128
    long = text_encoder.tokenize("word " * 300)
    assert len(long["t5xxl"]) == 1  # only T5's first window is kept, as ComfyUI does


def test_dual_clip_loader_type_hidream_gives_comfyuis_zeros_for_t5_and_llama(demo_workspace) -> None:
    """DualCLIPLoader type hidream with CLIP-L and CLIP-G (ComfyUI's hidream_clip with only those): the pooled
    vector from both, zeros of the real widths for T5's conditioning and the Llama's states."""
    from nodes.loaders import DualCLIPLoader
    from nodes.models.loader import load_text_encoder

    (ref,) = DualCLIPLoader().load_clip(Path(TEXT_FILES[0]).name, Path(TEXT_FILES[1]).name, "hidream")
    assert ref.arch == "hidream"
    te = load_text_encoder(ref)
    tokens = te.tokenize("a cat")
    cond, pooled = te.encode(tokens)
    assert cond.shape == (1, 128, 4096) and not cond.any()
    assert te.extras(tokens)["conditioning_llama3"].shape == (1, 32, 1, 4096)
    four = load_text_encoder(make(demo_workspace, "text_encoder", TEXT_FILES, "hidream"))
    assert torch.equal(pooled, four.encode(tokens)[1])


def test_scaled_fp8_llama_loads_as_its_dequantized_weights(demo_workspace, tmp_path) -> None:
    """The templates' llama_3.1_8b_instruct_fp8_scaled: ComfyUI's scaled fp8 (weight in fp8 times scale_weight)."""
    from safetensors.torch import load_file, save_file

    from nodes.loaders import make_ref
    from nodes.models.fp8 import dequantize_scaled_fp8
    from nodes.models.loader import load_text_encoder

    plain = load_file(demo_workspace.models_dir / TEXT_FILES[3])
    scaled = {"scaled_fp8": torch.zeros(0, dtype=torch.float8_e4m3fn)}
    for key, value in plain.items():
        if key.endswith("proj.weight"):
            scale = value.abs().max() / 448.0
            scaled[key] = (value / scale).to(torch.float8_e4m3fn)
            scaled[key[: -len("weight")] + "scale_weight"] = scale.reshape(1)
        else:
            scaled[key] = value
    save_file(scaled, str(tmp_path / "llama_fp8_scaled.safetensors"))
    save_file(dequantize_scaled_fp8(scaled), str(tmp_path / "llama_dequantized.safetensors"))
    tokens = {"l": [], "g": [], "t5xxl": [], "llama": [[(128000, 1.0), (15339, 1.0)] + [(128009, 1.0)] * 6]}
    outs = []
    for name in ("llama_fp8_scaled", "llama_dequantized"):
        te = load_text_encoder(make_ref("text_encoder", "hidream", [tmp_path / f"{name}.safetensors"]))
        outs.append(te.extras(tokens)["conditioning_llama3"])
    assert torch.equal(outs[0], outs[1])


def test_demo_files_are_byte_identical_when_rebuilt(demo_workspace, tmp_path) -> None:
    from nodes.models.hidream_demo import build_demo_hidream

    for path in build_demo_hidream(tmp_path):
        rel = path.relative_to(tmp_path)
        assert path.read_bytes() == (demo_workspace.models_dir / rel).read_bytes(), rel
