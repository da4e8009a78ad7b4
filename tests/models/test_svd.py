"""Stable Video Diffusion (issue 39) checked against ComfyUI 0.3.64 on svd_xt-tiny (nodes/models/svd_demo.py): the
checkpoint is detected as ComfyUI's SVD_img2vid (V_PREDICTION_EDM between sigma 0.002 and 700); its CLIP image
encoder, its VAE's encoder and temporal decoder, and one evaluation of its VideoUNet (frame counts, sizes, sigmas,
ADM values, batches of two videos, with and without the image latent) equal ComfyUI's within 1e-5
(tests/models/fixtures/comfyui_svd.json.xz, recorded by scripts/record_comfyui_svd.py)."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest
import torch

from nodes.loaders import make_ref
from nodes.models import loader
from nodes.models.detect import probe
from nodes.models.svd_demo import FILE, build_demo_svd
from nodes.sampling.model_sampling import model_sampling_from_config
from tests.node_calls import active_workspace
from tests.recorded_tensors import at_recorded, load_json, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_svd.json")
CHECKPOINT = f"checkpoints/{FILE}"
ATOL, RTOL = 1e-5, 1e-4
SAMPLED_ATOL = 1e-4


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """An active workspace holding svd_xt-tiny, whose ModelFns run in-process."""
    torch.set_num_threads(1)
    yield from active_workspace(tmp_path_factory.mktemp("svd-ws"), build_demo_svd)


def _ref(workspace, component: str):
    return make_ref(component, "svd", [workspace.models_dir / CHECKPOINT])


def test_the_file_is_the_recorded_one_detected_as_svd(workspace) -> None:
    digest = hashlib.sha256((workspace.models_dir / CHECKPOINT).read_bytes()).hexdigest()
    assert digest == FIXTURE["files"][CHECKPOINT]
    assert (FIXTURE["model_config"], FIXTURE["model_type"]) == ("SVD_img2vid", "V_PREDICTION_EDM")
    info = probe(workspace.models_dir / CHECKPOINT)
    assert (info.arch, info.kind) == ("svd", "checkpoint")
    assert set(info.components) == {"diffusion_model", "vae", "clip_vision"}


def test_sampling_is_comfyuis_v_prediction_edm(workspace) -> None:
    model = loader.load_diffusion_model(_ref(workspace, "diffusion_model"))
    ms = model_sampling_from_config(model.sampling)
    assert ms.prediction == "v"
    lo, hi = FIXTURE["sigma_range"]
    torch.testing.assert_close(ms.sigma_min.float(), torch.tensor(lo), atol=0, rtol=1e-6)
    torch.testing.assert_close(ms.sigma_max.float(), torch.tensor(hi), atol=0, rtol=1e-6)


@pytest.mark.parametrize("case", FIXTURE["steps"], ids=lambda c: c["name"])
def test_one_evaluation_equals_comfyuis(workspace, case) -> None:
    model = loader.load_diffusion_model(_ref(workspace, "diffusion_model"))
    ms = model_sampling_from_config(model.sampling)
    x, frames = tensor(case["x"]), case["frames"]
    sigma = torch.full((x.shape[0],), case["sigma"])
    image = None if case["image_latent"] is None else tensor(case["image_latent"])
    adm = torch.tensor([[case["fps"], case["motion_bucket_id"], case["augmentation_level"]]]).expand(x.shape[0], -1)
    cond = {
        "context": tensor(case["context"]).repeat_interleave(frames, dim=0),
        "concat": model.concat_image(image, x),
        "svd_adm": adm,
        "num_video_frames": frames,
    }
    with torch.no_grad():
        out = model.apply(ms.calculate_input(sigma, x), ms.timestep(sigma), cond)
        denoised = ms.calculate_denoised(sigma, out, x)
    rec = case["denoised"]
    torch.testing.assert_close(at_recorded(denoised, rec), tensor(rec), atol=ATOL, rtol=RTOL)


def test_the_clip_image_encoder_is_the_checkpoints(workspace) -> None:
    from nodes.models.clip_vision import load_clip_vision
    from nodes.models.safetensors_io import load_state_dict

    path = workspace.models_dir / CHECKPOINT
    encoder = load_clip_vision(load_state_dict(path), str(path))
    with torch.no_grad():
        embeds = encoder.encode(tensor(FIXTURE["image"]), crop=True)["image_embeds"]
    torch.testing.assert_close(embeds, tensor(FIXTURE["clip_vision"]["image_embeds"]), atol=ATOL, rtol=RTOL)


def test_the_vae_encodes_and_decodes_frames_as_comfyuis(workspace) -> None:
    vae = loader.load_vae(_ref(workspace, "vae"))
    latent = vae.encode(tensor(FIXTURE["image"]))
    torch.testing.assert_close(latent, tensor(FIXTURE["vae_encode"]), atol=ATOL, rtol=RTOL)
    for case in FIXTURE["decode"]:
        images = vae.decode(tensor(case["latent"]))
        torch.testing.assert_close(at_recorded(images, case["images"]), tensor(case["images"]), atol=ATOL, rtol=RTOL)


def _conditioning(workspace):
    from tests.node_calls import call_node

    rec = FIXTURE["conditioning"]
    (model, clip_vision, vae) = asyncio.run(call_node("ImageOnlyCheckpointLoader", ckpt_name=FILE))
    positive, negative, latent = asyncio.run(
        call_node(
            "SVD_img2vid_Conditioning",
            clip_vision=clip_vision,
            init_image=tensor(FIXTURE["image"]),
            vae=vae,
            augmentation_level=0.0,
            **rec["settings"],
        )
    )
    return model, vae, positive, negative, latent


def test_img2vid_conditioning_equals_comfyuis(workspace) -> None:
    rec = FIXTURE["conditioning"]
    _, _, positive, negative, latent = _conditioning(workspace)
    ((pooled, options),), ((zeros, neg_options),) = positive, negative
    torch.testing.assert_close(pooled, tensor(rec["positive"]), atol=ATOL, rtol=RTOL)
    assert {k: v for k, v in options.items() if k != "concat_latent_image"} == rec["positive_options"]
    torch.testing.assert_close(options["concat_latent_image"], tensor(rec["concat_latent_image"]), atol=ATOL, rtol=RTOL)
    torch.testing.assert_close(zeros, tensor(rec["negative"]), atol=0, rtol=0)
    assert not neg_options["concat_latent_image"].any() and not rec_any(rec["negative_concat_latent_image"])
    torch.testing.assert_close(latent["samples"], tensor(rec["latent"]), atol=0, rtol=0)


def rec_any(entry: dict) -> bool:
    return bool(tensor(entry).any())


def test_sampling_through_video_linear_cfg_equals_comfyuis(workspace) -> None:
    """KSampler (euler, karras, cfg 2.5 falling to 1 over the frames) on the conditioning, decoded: ComfyUI's."""
    from tests.node_calls import call_node

    rec = FIXTURE["sampled"]
    model, vae, positive, negative, latent = _conditioning(workspace)
    settings = {k: v for k, v in rec["settings"].items() if k != "min_cfg"}
    (guided,) = asyncio.run(call_node("VideoLinearCFGGuidance", model=model, min_cfg=rec["settings"]["min_cfg"]))
    (samples,) = asyncio.run(
        call_node(
            "KSampler", model=guided, positive=positive, negative=negative, latent_image=latent, denoise=1.0, **settings
        )
    )
    # sampling starts from noise at sigma 700: float32 rounding of latents that large reaches 1e-4 after three steps
    torch.testing.assert_close(samples["samples"], tensor(rec["latent"]), atol=SAMPLED_ATOL, rtol=RTOL)
    (frames,) = asyncio.run(call_node("VAEDecode", samples=samples, vae=vae))
    torch.testing.assert_close(at_recorded(frames, rec["frames"]), tensor(rec["frames"]), atol=SAMPLED_ATOL, rtol=0)


def test_an_sv3d_style_unet_is_refused_by_name(workspace, tmp_path) -> None:
    """SV3D's VideoUNet has SVD's layout with a 256-wide ADM (the augmentation level alone): not this family."""
    from safetensors.torch import load_file, save_file

    from nodes.models.errors import ModelLoadError

    sd = load_file(workspace.models_dir / CHECKPOINT)
    sd["model.diffusion_model.label_emb.0.0.weight"] = sd["model.diffusion_model.label_emb.0.0.weight"][
        :, :256
    ].contiguous()
    path = tmp_path / "sv3d_u.safetensors"
    save_file(sd, str(path))
    assert probe(path).arch == "svd"
    with pytest.raises(ModelLoadError, match="SV3D"):
        loader.load_diffusion_model(make_ref("diffusion_model", "svd", [path]))


def test_img2vid_conditioning_names_a_bad_image(workspace) -> None:
    from tests.node_calls import call_node

    (_, clip_vision, vae) = asyncio.run(call_node("ImageOnlyCheckpointLoader", ckpt_name=FILE))
    with pytest.raises(ValueError, match="init_image"):
        asyncio.run(
            call_node(
                "SVD_img2vid_Conditioning",
                clip_vision=clip_vision,
                init_image=torch.zeros(64, 96, 3),
                vae=vae,
                augmentation_level=0.0,
                **FIXTURE["conditioning"]["settings"],
            )
        )
