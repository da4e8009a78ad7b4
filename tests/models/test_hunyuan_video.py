"""HunyuanVideo 1.0 (nodes/models/hunyuan_video*.py) against ComfyUI 0.3.64 on the tiny files
(scripts/record_comfyui_hunyuan_video.py): detection and model sampling, the hunyuan_video text encoders'
conditioning, the raw network output (text to video, "v2 (replace)"'s guiding_frame_index, "custom"'s ref_latent)
and one model step's prediction for the text-to-video and the "v1 (concat)" image-to-video models."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest
import torch

from tests.recorded_tensors import at_recorded, load_json, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_hunyuan_video.json.xz")
T2V, I2V, LLAMA, CLIP_L = list(FIXTURE["files"])[:4]
ATOL = 1e-5


def recorded_inputs(seed: int = 39) -> dict[str, torch.Tensor]:
    """The recorder's seeded draws, in its order."""
    g = torch.Generator().manual_seed(seed)
    return {
        "x": torch.randn(2, 16, 3, 8, 12, generator=g),
        "context": torch.randn(2, 7, 16, generator=g),
        "y": torch.randn(2, 32, generator=g),
        "ref": torch.randn(1, 16, 1, 8, 12, generator=g),
        "start": torch.randn(1, 16, 1, 8, 12, generator=g),
    }


def close(ours: torch.Tensor, entry: dict, atol: float = ATOL) -> None:
    torch.testing.assert_close(at_recorded(ours, entry), tensor(entry), atol=atol, rtol=0)


def test_inputs_and_files_are_the_recorded_ones(demo_workspace):
    for name, value in recorded_inputs().items():
        assert float(value.sum()) == pytest.approx(FIXTURE["input_sums"][name], abs=1e-4), name
    for rel, digest in FIXTURE["files"].items():
        assert hashlib.sha256((demo_workspace.models_dir / rel).read_bytes()).hexdigest() == digest, rel


@pytest.fixture(scope="module")
def models(demo_workspace):
    from nodes.loaders import make_ref
    from nodes.models.loader import load_diffusion_model

    torch.set_num_threads(1)
    return {
        rel: load_diffusion_model(make_ref("diffusion_model", "hunyuan_video", [demo_workspace.models_dir / rel]))
        for rel in (T2V, I2V)
    }


def test_detection_and_sampling_are_comfyuis(demo_workspace, models):
    from nodes.arch import is_video
    from nodes.models.detect import probe
    from nodes.sampling.model_sampling import model_sampling_from_config

    for rel, key, cls in ((T2V, "t2v", "HunyuanVideo"), (I2V, "i2v", "HunyuanVideoI2V")):
        info = probe(demo_workspace.models_dir / rel)
        assert (info.arch, info.kind) == ("hunyuan_video", "diffusion_model")
        recorded = FIXTURE[key]
        assert recorded["model_class"] == cls
        config, want = models[rel].module.config, recorded["unet_config"]
        assert config.in_channels == want["in_channels"] and config.out_channels == want["out_channels"]
        assert list(config.patch) == want["patch_size"] and config.hidden == want["hidden_size"]
        assert config.heads == want["num_heads"] and config.context_dim == want["context_in_dim"]
        assert (config.depth, config.depth_single) == (want["depth"], want["depth_single_blocks"])
        assert config.guidance_embed == want["guidance_embed"] and config.vec_in_dim == want["vec_in_dim"]
    model = models[T2V]
    assert model.sampling["shift"] == FIXTURE["shift"] == 7.0
    assert model.latent_format.scale_factor == 0.476986 and is_video("hunyuan_video")
    ms = model_sampling_from_config(model.sampling)
    for t, want in zip((999.0, 500.0, 1.0), FIXTURE["sigmas"], strict=True):
        assert float(ms.sigma(torch.tensor([t]))) == pytest.approx(want, abs=1e-6)


def test_refiner_and_other_hunyuan_files_are_told_apart():
    from nodes.models.hunyuan_video import infer_config, layout

    with pytest.raises(ValueError, match="not a HunyuanVideo state dict"):
        layout({"foo": torch.zeros(1)})
    with pytest.raises(ValueError, match="not 3-D"):
        infer_config({"img_in.proj.weight": torch.zeros(128, 64, 1, 1)})


@pytest.fixture(scope="module")
def text_encoder(demo_workspace):
    from nodes.loaders import DualCLIPLoader
    from nodes.models.loader import load_text_encoder

    (ref,) = DualCLIPLoader().load_clip(Path(LLAMA).name, Path(CLIP_L).name, "hunyuan_video")
    return load_text_encoder(ref)


@pytest.mark.parametrize("case", sorted(FIXTURE["text"]))
def test_conditioning_equals_comfyuis(text_encoder, case):
    torch.set_num_threads(1)
    want = FIXTURE["text"][case]
    tokens = text_encoder.tokenize(want["prompt"])
    assert [t for chunk in tokens["llama"] for t, _ in chunk] == want["llama_ids"]
    assert [[t for t, _ in chunk] for chunk in tokens["l"]] == want["clip_ids"]
    cond, pooled = text_encoder.encode(tokens)
    assert want["extra_keys"] == ["pooled_output"]  # ComfyUI drops the all-ones text mask
    torch.testing.assert_close(cond, tensor(want["cond"]), atol=ATOL, rtol=0)
    torch.testing.assert_close(pooled, tensor(want["pooled"]), atol=ATOL, rtol=0)


def test_files_in_either_order_and_bad_pairs_refused(demo_workspace, text_encoder):
    from nodes.loaders import DualCLIPLoader
    from nodes.models.errors import ModelLoadError
    from nodes.models.loader import load_text_encoder

    torch.set_num_threads(1)
    (ref,) = DualCLIPLoader().load_clip(Path(CLIP_L).name, Path(LLAMA).name, "hunyuan_video")
    te = load_text_encoder(ref)
    want = FIXTURE["text"]["plain"]
    cond, pooled = te.encode(te.tokenize(want["prompt"]))
    torch.testing.assert_close(cond, tensor(want["cond"]), atol=ATOL, rtol=0)
    (ref,) = DualCLIPLoader().load_clip(Path(CLIP_L).name, Path(CLIP_L).name, "hunyuan_video")
    with pytest.raises(ModelLoadError, match="llava-llama3"):
        load_text_encoder(ref)


@torch.no_grad()
def test_raw_network_outputs_equal_comfyuis(models):
    torch.set_num_threads(1)
    net = models[T2V].module
    data = recorded_inputs()
    t = torch.tensor([937.5, 250.0])
    guidance = torch.tensor([6.0, 6.0])
    plain = net(data["x"], t, data["context"], data["y"], guidance)
    close(plain, FIXTURE["raw"])
    one = {k: v[:1] for k, v in data.items()}
    replaced = net(one["x"], t[:1], one["context"], one["y"], guidance[:1], guiding_frame_index=torch.zeros(1))
    close(replaced, FIXTURE["raw_replace"])
    assert not torch.allclose(replaced, plain[:1], atol=1e-3)
    ref = net(one["x"], t[:1], one["context"], one["y"], guidance[:1], ref_latent=one["ref"])
    close(ref, FIXTURE["raw_ref_latent"])
    # our module runs token replacement at any batch (ComfyUI's at batch 1): each sample as alone
    both = net(data["x"], t, data["context"], data["y"], guidance, guiding_frame_index=torch.zeros(2))
    torch.testing.assert_close(both[:1], replaced, atol=1e-6, rtol=0)


def denoised(model, data: dict, sigma: float, cond: dict) -> torch.Tensor:
    from nodes.sampling.model_sampling import model_sampling_from_config

    ms = model_sampling_from_config(model.sampling)
    x = data["x"]
    s = torch.full((x.shape[0],), sigma)
    cond = {"context": data["context"], "pooled": data["y"], **cond}
    return ms.calculate_denoised(s, model.apply(ms.calculate_input(s, x), ms.timestep(s), cond), x)


@torch.no_grad()
def test_one_step_predictions_equal_comfyuis(models):
    """apply_model at sigma 0.8 from model_base's conds: the default guidance 6; FluxGuidance 3.5 with "v2
    (replace)"'s guiding_frame_index; the "v1 (concat)" model with the start latent and HunyuanImageToVideo's mask
    (the image latent process_latent_in'd, then 1 - mask), and without them (zeros)."""
    torch.set_num_threads(1)
    data = recorded_inputs()
    close(denoised(models[T2V], data, 0.8, {}), FIXTURE["denoised_t2v"])
    one = {k: v[:1] for k, v in data.items()}
    replace = denoised(models[T2V], one, 0.8, {"guidance": 3.5, "guiding_frame_index": 0})
    close(replace, FIXTURE["denoised_replace"])
    i2v = models[I2V]
    mask = torch.ones(1, 1, 3, 8, 12)
    mask[:, :, :1] = 0.0
    concat = i2v.concat_image(data["start"], data["x"], mask)
    close(concat, FIXTURE["concat_i2v"], atol=1e-6)
    close(denoised(i2v, data, 0.8, {"concat": concat}), FIXTURE["denoised_i2v"])
    # the conditioning's own keys give the same joined channels when the step has not joined them
    cond = {"concat_latent_image": data["start"], "concat_mask": mask}
    close(denoised(i2v, data, 0.8, cond), FIXTURE["denoised_i2v"])
    close(denoised(i2v, data, 0.8, {}), FIXTURE["denoised_i2v_no_image"])
    with pytest.raises(ValueError, match="pooled"):
        i2v.apply(data["x"], torch.tensor([500.0]), {"context": data["context"]})


@pytest.fixture(scope="module")
def vision_output(demo_workspace):
    from nodes.library.clip_vision import CLIPVisionEncode, CLIPVisionLoader

    torch.set_num_threads(1)
    (ref,) = CLIPVisionLoader().load_clip("llava_llama3_vision_tiny.safetensors")
    image = torch.rand(1, 40, 52, 3, generator=torch.Generator().manual_seed(11))
    (output,) = asyncio.run(CLIPVisionEncode().encode(ref, image, "center"))
    return output


def test_llava_vision_projection_equals_comfyuis(demo_workspace, vision_output):
    """CLIPVisionEncode with llava-llama3's vision file: mm_projected, the projector on the penultimate layer's patch
    states (the class token left out), the weights in float16 as ComfyUI holds a CLIP vision model."""
    rel = "clip_vision/llava_llama3_vision_tiny.safetensors"
    assert hashlib.sha256((demo_workspace.models_dir / rel).read_bytes()).hexdigest() == FIXTURE["files"][rel]
    recorded = FIXTURE["image_to_video_text"]
    assert recorded["vision_dtype"] == "torch.float16"
    torch.testing.assert_close(vision_output.mm_projected, tensor(recorded["mm_projected"]), atol=ATOL, rtol=0)


@pytest.mark.parametrize("case", sorted(FIXTURE["image_to_video_text"]["cases"]))
def test_image_to_video_prompt_equals_comfyuis(demo_workspace, vision_output, case):
    """TextEncodeHunyuanVideo_ImageToVideo: the image-to-video template with the image's projected tokens in place of
    <image>, every image_interleave-th of their states first, then the user's turn (the recorder's I2V_TEXT_CASES)."""
    from nodes.library.hunyuan_video import TextEncodeHunyuanVideo_ImageToVideo
    from nodes.loaders import DualCLIPLoader

    torch.set_num_threads(1)
    prompt, interleave = {"interleave_1": ("a red fox running in the snow", 1), "interleave_2": ("a fox", 2)}.get(
        case, ("", 3)
    )
    (clip,) = DualCLIPLoader().load_clip(Path(LLAMA).name, Path(CLIP_L).name, "hunyuan_video")
    ((cond, opts),) = asyncio.run(
        TextEncodeHunyuanVideo_ImageToVideo().encode(clip, vision_output, prompt, interleave)
    )[0]
    want = FIXTURE["image_to_video_text"]["cases"][case]
    assert want["extra_keys"] == ["pooled_output"]
    torch.testing.assert_close(cond, tensor(want["cond"]), atol=ATOL, rtol=0)
    torch.testing.assert_close(opts["pooled_output"], tensor(want["pooled"]), atol=ATOL, rtol=0)


def test_image_to_video_prompt_needs_llava_tokens(demo_workspace):
    from nodes.library.clip_vision import ClipVisionOutput
    from nodes.library.hunyuan_video import TextEncodeHunyuanVideo_ImageToVideo
    from nodes.loaders import DualCLIPLoader

    (clip,) = DualCLIPLoader().load_clip(Path(LLAMA).name, Path(CLIP_L).name, "hunyuan_video")
    plain = ClipVisionOutput(torch.zeros(1, 5, 32), torch.zeros(1, 32), torch.zeros(1, 5, 32))
    with pytest.raises(ValueError, match="mm_projected"):
        asyncio.run(TextEncodeHunyuanVideo_ImageToVideo().encode(clip, plain, "a fox", 2))


def test_llava_vision_file_without_a_visual_projection_loads(demo_workspace):
    """llava's vision tower may be published without CLIP's visual_projection (a llava model has none): it loads,
    its mm_projected unchanged (image_embeds are zeros: ComfyUI's come from a projection the file does not fill)."""
    from safetensors.torch import load_file

    from nodes.models.clip_vision import load_clip_vision

    torch.set_num_threads(1)
    sd = load_file(demo_workspace.models_dir / "clip_vision/llava_llama3_vision_tiny.safetensors")
    sd.pop("visual_projection.weight")
    encoder = load_clip_vision(sd)
    image = torch.rand(1, 40, 52, 3, generator=torch.Generator().manual_seed(11))
    with torch.no_grad():
        out = encoder.encode(image, crop=True)
    recorded = FIXTURE["image_to_video_text"]["mm_projected"]
    torch.testing.assert_close(out["mm_projected"], tensor(recorded), atol=ATOL, rtol=0)
    assert not out["image_embeds"].any()
    sd.pop("multi_modal_projector.linear_1.weight")
    with pytest.raises(Exception, match="visual_projection"):
        load_clip_vision(sd)
