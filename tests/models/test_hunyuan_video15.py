"""HunyuanVideo 1.5 against upstream ComfyUI 0.10.0 run on the same tiny files (scripts/record_comfyui_hunyuan_video15.py
-> fixtures/comfyui_hunyuan_video15.json.xz): detection of the published layouts, the transformer's raw output (text
only; text, ByT5 and SigLIP tokens), the denoised prediction from an image-to-video conditioning (image latent and
mask joined as channels), the causal VAE's decode and encode, and the two latent nodes."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file, save_file

from nodes.loaders import make_ref
from nodes.models import loader
from nodes.models.detect import probe
from nodes.models.errors import ModelLoadError
from nodes.models.hunyuan_video15_demo import FILES, build_demo_hunyuan_video15
from nodes.sampling.model_sampling import model_sampling_from_config
from tests.recorded_tensors import at_recorded, load_json, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_hunyuan_video15.json")
TOL = 1e-5
TEXT_WIDTH, VISION_WIDTH, BYT5_WIDTH = 32, 32, 32


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("hunyuan_video15")
    build_demo_hunyuan_video15(root)
    return {name: root / rel for name, rel in FILES.items()}


@pytest.fixture(scope="module")
def model(files):
    torch.set_num_threads(2)
    return loader.load_diffusion_model(make_ref("diffusion_model", "hunyuan_video15", [files["transformer"]]))


@pytest.fixture(scope="module")
def vae(files):
    return loader.load_vae(make_ref("vae", "hunyuan_video15", [files["vae"]]))


def draws(seed: int, *shapes: list[int]) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=g) for s in shapes]


def test_same_files_as_recorded(files):
    for name, path in files.items():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == FIXTURE["files"][name], name


def test_published_layouts_are_detected(files, tmp_path):
    names = set(load_file(files["transformer"]))
    assert {
        "double_blocks.0.img_attn_qkv.weight",
        "txt_in.individual_token_refiner.blocks.0.self_attn_qkv.weight",
        "vision_in.proj.0.weight",
        "cond_type_embedding.weight",
        "byt5_in.fc1.weight",
        "final_layer.adaLN_modulation.1.weight",
    } <= names
    assert not any(k.startswith("single_blocks.") for k in names)
    info = probe(files["transformer"])
    assert (info.arch, info.kind, info.layout) == ("hunyuan_video15", "diffusion_model", "hunyuan")
    # ComfyUI read the same file as 1.5 (its recorder gave the config the tiny SigLIP width in place of 1152)
    assert FIXTURE["detected"]["model_class"] == "HunyuanVideo15"
    prefixed = tmp_path / "prefixed.safetensors"
    save_file({f"model.diffusion_model.{k}": v for k, v in load_file(files["transformer"]).items()}, str(prefixed))
    assert probe(prefixed).prefix == "model.diffusion_model."
    assert {
        "encoder.down.0.block.0.conv1.conv.weight",
        "encoder.down.0.downsample.conv.conv.weight",
        "decoder.up.0.upsample.conv.conv.weight",
        "encoder.mid.attn_1.q.weight",
        "decoder.norm_out.gamma",
    } <= set(load_file(files["vae"]))
    info = probe(files["vae"])
    assert (info.arch, info.kind) == ("hunyuan_video15", "vae")
    assert FIXTURE["detected"]["vae_latent_channels"] == 32


def test_split_qkv_is_refused_by_name(files, tmp_path):
    sd = load_file(files["transformer"])
    qkv = sd.pop("double_blocks.0.img_attn_qkv.weight")
    for name, chunk in zip("qkv", qkv.chunk(3), strict=True):
        sd[f"double_blocks.0.img_attn_{name}.weight"] = chunk
    path = tmp_path / "split.safetensors"
    save_file(sd, str(path))
    with pytest.raises(ModelLoadError, match="split q/k/v"):
        loader.load_diffusion_model(make_ref("diffusion_model", "hunyuan_video15", [path]))


def test_sr_distilled_model_is_refused_by_name(files, tmp_path):
    sd = load_file(files["transformer"])
    weight = sd["img_in.proj.weight"]  # the 1080p SR-distilled model takes 98 channels
    sd["img_in.proj.weight"] = torch.cat([weight, weight[:, :33]], dim=1)
    path = tmp_path / "sr.safetensors"
    save_file(sd, str(path))
    with pytest.raises(ModelLoadError, match="SR-distilled"):
        loader.load_diffusion_model(make_ref("diffusion_model", "hunyuan_video15", [path]))


@pytest.mark.parametrize("case", FIXTURE["transformer"], ids=lambda c: f"seed{c['seed']}")
def test_transformer_matches_comfyui(model, case):
    shape = case["shape"]
    x, context, byt5, clip = draws(
        case["seed"],
        shape,
        [shape[0], case["tokens"], TEXT_WIDTH],
        [shape[0], case["glyphs"], BYT5_WIDTH],
        [shape[0], case["vision"], VISION_WIDTH],
    )
    assert float(x.sum() + context.sum() + byt5.sum() + clip.sum()) == pytest.approx(case["input_sum"], rel=1e-6)
    cond = {"context": context}
    if case["glyphs"]:
        cond["conditioning_byt5small"] = byt5
    if case["vision"]:
        cond["clip_vision_output"] = SimpleNamespace(last_hidden_state=clip)
    with torch.no_grad():  # the network on its 65 input channels, as ComfyUI's diffusion_model was called
        out = model.network(x, torch.tensor(case["timesteps"]), cond)
    expected = tensor(case["out"])
    got = at_recorded(out, case["out"])
    assert got.shape == expected.shape
    assert (got - expected).abs().max().item() < TOL


def test_denoised_prediction_matches_comfyui(model):
    rec = FIXTURE["denoised"]
    x, context, image, clip = draws(3, [1, 32, 3, 2, 3], [1, 6, TEXT_WIDTH], [1, 32, 3, 2, 3], [1, 5, VISION_WIDTH])
    assert float(x.sum() + context.sum() + image.sum() + clip.sum()) == pytest.approx(rec["input_sum"], rel=1e-6)
    mask = torch.ones(1, 1, 3, 2, 3)
    mask[:, :, :1] = 0.0
    sampling = model_sampling_from_config(model.sampling)
    sigmas = torch.tensor(rec["sampling"]["sigmas"])
    assert torch.allclose(sampling.timestep(sigmas), torch.tensor(rec["sampling"]["timesteps"]), atol=1e-4)
    assert torch.allclose(model.latent_format.process_in(x), tensor(rec["process_in"]), atol=1e-6)
    cond = {
        "context": context,
        "concat_latent_image": image,
        "concat_mask": mask,
        "clip_vision_output": SimpleNamespace(last_hidden_state=clip),
    }
    sigma = torch.tensor([rec["sigma"]])
    with torch.no_grad():
        raw = model.apply(sampling.calculate_input(sigma, x), sampling.timestep(sigma), cond)
    denoised = sampling.calculate_denoised(sigma, raw, x)
    assert (denoised - tensor(rec["denoised"])).abs().max().item() < TOL


def test_vae_matches_comfyui(vae):
    rec = FIXTURE["vae"]
    g = torch.Generator().manual_seed(5)
    latent = torch.randn([1, 32, 3, 2, 2], generator=g)
    clip = torch.rand([5, 32, 48, 3], generator=g)
    image = torch.rand([1, 48, 32, 3], generator=g)
    assert float(latent.sum() + clip.sum() + image.sum()) == pytest.approx(rec["input_sum"], rel=1e-6)
    decoded = vae.decode(latent)
    assert decoded.shape == (9, 32, 32, 3)
    decoded = decoded[None]  # ComfyUI's VAE.decode keeps [B,T,H,W,3]; its VAEDecode node flattens it as ours does
    assert (at_recorded(decoded, rec["decoded"]) - tensor(rec["decoded"])).abs().max().item() < TOL
    for pixels, key in ((clip, "encoded_clip"), (image, "encoded_image")):
        encoded = vae.encode(pixels)
        assert encoded.shape == tensor(rec[key]).shape
        assert (encoded - tensor(rec[key])).abs().max().item() < TOL, key


@pytest.fixture(scope="module")
def workspace(files, tmp_path_factory):
    """An active workspace holding hunyuan-video-1.5-tiny, whose ModelFns run in-process."""
    import shutil

    from nodes import workspace as ws_module

    previous = ws_module._active
    ws = ws_module.activate(ws_module.Workspace(tmp_path_factory.mktemp("hv15-ws")).create())
    root = files["vae"].parents[1]
    for sub in root.iterdir():
        shutil.copytree(sub, ws.models_dir / sub.name, dirs_exist_ok=True)
    yield ws
    ws_module._active = previous


def test_latent_nodes_equal_comfyuis(workspace):
    from nodes.library.hunyuan_video15 import EmptyHunyuanVideo15Latent, HunyuanVideo15ImageToVideo

    rec = FIXTURE["nodes"]
    g = torch.Generator().manual_seed(8)
    start = torch.rand([2, 40, 56, 3], generator=g)
    cond = torch.randn([1, 4, TEXT_WIDTH], generator=g)
    clip_out = SimpleNamespace(last_hidden_state=torch.randn([1, 5, VISION_WIDTH], generator=g))
    assert float(start.sum() + cond.sum() + clip_out.last_hidden_state.sum()) == pytest.approx(rec["input_sum"])
    (empty,) = EmptyHunyuanVideo15Latent().execute(48, 32, 9, 2)
    assert list(empty["samples"].shape) == rec["empty_shape"] and not empty["samples"].any()
    vae_ref = make_ref("vae", "hunyuan_video15", [workspace.models_dir / FILES["vae"]])
    pos, neg, latent = asyncio.run(
        HunyuanVideo15ImageToVideo().execute(
            [[cond, {}]], [[cond * 2, {}]], vae_ref, 64, 32, 9, 1, start_image=start, clip_vision_output=clip_out
        )
    )
    assert list(latent["samples"].shape) == rec["latent_shape"]
    assert sorted(pos[0][1]) == rec["positive_keys"]
    for opts in (pos[0][1], neg[0][1]):
        assert (opts["concat_latent_image"] - tensor(rec["concat_latent_image"])).abs().max().item() < TOL
        assert torch.equal(opts["concat_mask"], tensor(rec["concat_mask"]))
        assert opts["clip_vision_output"] is clip_out
    wrong = make_ref("vae", "sd1", [workspace.models_dir / FILES["vae"]])
    with pytest.raises(ValueError, match="HunyuanVideo 1.5 VAE"):
        asyncio.run(
            HunyuanVideo15ImageToVideo().execute([[cond, {}]], [[cond, {}]], wrong, 64, 32, 9, 1, start_image=start)
        )


@pytest.fixture(scope="module")
def text_encoder(files, tmp_path_factory):
    """DualCLIPLoader type hunyuan_video_15 on the tiny Qwen2.5-VL and hunyuan-image-2.1-tiny's glyph ByT5 (the
    recorded files)."""
    from nodes.models.hunyuan_image_demo import FILES as IMAGE_FILES
    from nodes.models.hunyuan_image_demo import build_demo_hunyuan_image

    root = tmp_path_factory.mktemp("hv15_byt5")
    build_demo_hunyuan_image(root)
    byt5 = root / IMAGE_FILES["byt5"]
    assert hashlib.sha256(byt5.read_bytes()).hexdigest() == FIXTURE["files"]["byt5"]
    ref = make_ref("text_encoder", "hunyuan_video15", [files["text_encoder"], byt5], clip_type="hunyuan_video_15")
    return loader.load_text_encoder(ref)


@pytest.mark.parametrize("name", sorted(FIXTURE["text"]))
def test_text_encoder_tokens_and_conditioning_equal_comfyui(text_encoder, name):
    rec = FIXTURE["text"][name]
    tokens = text_encoder.tokenize(rec["prompt"])
    assert [t for t, _ in tokens["qwen25_7b"][0]] == rec["ids"]
    assert rec["extra_keys"] == ([] if rec["byt5"] is None else ["conditioning_byt5small"])  # no masked token
    cond, pooled = text_encoder.encode(tokens)
    assert pooled is None
    assert cond.shape == tensor(rec["cond"]).shape
    assert (cond - tensor(rec["cond"])).abs().max().item() < TOL
    extras = text_encoder.extras(tokens)
    if rec["byt5"] is None:  # no quoted text: no glyph tokens
        assert "byt5" not in tokens and not extras
    else:
        assert [t for t, _ in tokens["byt5"][0]] == rec["byt5_ids"]
        assert (extras["conditioning_byt5small"] - tensor(rec["byt5"])).abs().max().item() < TOL


def test_super_resolution_conditioning_equals_comfyuis(workspace):
    from nodes.library.hunyuan_video15 import HunyuanVideo15SuperResolution

    rec = FIXTURE["nodes"]["super_resolution"]
    g = torch.Generator().manual_seed(8)
    start = torch.rand([2, 40, 56, 3], generator=g)
    cond = torch.randn([1, 4, TEXT_WIDTH], generator=g)
    clip_out = SimpleNamespace(last_hidden_state=torch.randn([1, 5, VISION_WIDTH], generator=g))
    low = torch.randn([1, 32, 2, 3, 2], generator=torch.Generator().manual_seed(9))
    assert float(low.sum()) == pytest.approx(rec["input_sum"])
    vae_ref = make_ref("vae", "hunyuan_video15", [workspace.models_dir / FILES["vae"]])
    node = HunyuanVideo15SuperResolution()
    for name, kwargs in (
        ("latent_only", {}),
        ("start_image", {"vae": vae_ref, "start_image": start, "clip_vision_output": clip_out}),
    ):
        pos, neg, latent = asyncio.run(node.execute([[cond, {}]], [[cond * 2, {}]], {"samples": low}, 0.35, **kwargs))
        assert sorted(pos[0][1]) == rec[name]["positive_keys"] and latent["samples"] is low
        for opts in (pos[0][1], neg[0][1]):
            assert (opts["concat_latent_image"] - tensor(rec[name]["concat_latent_image"])).abs().max().item() < TOL
            assert opts["noise_augmentation"] == rec[name]["noise_augmentation"]
    with pytest.raises(ValueError, match="needs the VAE"):
        asyncio.run(node.execute([[cond, {}]], [[cond, {}]], {"samples": low}, 0.35, start_image=start))


def test_latent_upscale_with_model_equals_comfyuis(workspace):
    from nodes.library.hunyuan_video15 import HunyuanVideo15LatentUpscaleWithModel
    from nodes.library.ltxv_upsampler import LatentUpscaleModelLoader

    rec = FIXTURE["latent_upscale"]
    latent = torch.randn([1, 32, 2, 3, 4], generator=torch.Generator().manual_seed(11))
    assert float(latent.sum()) == pytest.approx(rec["input_sum"])
    (model,) = LatentUpscaleModelLoader().execute(Path(FILES["latent_upsampler"]).name)
    assert model.arch == "hunyuan_video15_upsampler"
    node = HunyuanVideo15LatentUpscaleWithModel()
    for case in rec["cases"]:
        (out,) = asyncio.run(node.execute(model, {"samples": latent}, *case["args"]))
        expected = tensor(case["samples"])
        assert out["samples"].shape == expected.shape, case["args"]
        assert (out["samples"] - expected).abs().max().item() < TOL, case["args"]
    (same,) = asyncio.run(node.execute(model, {"samples": latent}, "bilinear", 0, 0, "disabled"))
    assert same["samples"] is latent  # ComfyUI: width and height 0 leave the latent as it is
    vae = make_ref("vae", "hunyuan_video15", [workspace.models_dir / FILES["vae"]])
    with pytest.raises(ValueError, match="LATENT_UPSCALE_MODEL"):
        asyncio.run(node.execute(vae, {"samples": latent}, "bilinear", 128, 96, "disabled"))
