"""Wan 2.2 14B Fun Camera (issue 39) checked against ComfyUI 0.3.64 on wan-tiny's wan2.2_fun_camera_14B_tiny: the
file is ComfyUI's WAN22_Camera (36 input channels, the camera control adapter, no CLIP image states);
WanCameraImageToVideo's conditioning, then the model's concat (the 4 mask channels before the start latent) and one
evaluation with its camera conditions equal ComfyUI's (tests/models/fixtures/comfyui_wan22_camera.json.xz, recorded
by scripts/record_comfyui_wan22_camera.py). templates_render maps the template's two experts to the file."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest
import torch

from nodes.arch import sampling_config
from nodes.conditioning import flatten
from nodes.loaders import make_ref
from nodes.models import loader
from nodes.models.detect import probe
from nodes.models.wan_demo import FILES, build_demo_wan, tiny_wan_state_dicts
from nodes.sampling.model_sampling import model_sampling_from_config
from tests.node_calls import active_workspace
from tests.recorded_tensors import at_recorded, load_json, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_wan22_camera.json.xz")
ATOL, RTOL = 2e-5, 1e-4


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """An active workspace holding wan-tiny, whose ModelFns run in-process."""
    yield from active_workspace(tmp_path_factory.mktemp("wan22-camera-ws"), build_demo_wan)


def test_the_file_is_the_recorded_one_in_wan22_cameras_layout(workspace) -> None:
    for part, rec in {"fun22_camera": FIXTURE["files"]["model"], "vae": FIXTURE["files"]["vae"]}.items():
        assert rec["path"] == FILES[part]
        assert hashlib.sha256((workspace.models_dir / FILES[part]).read_bytes()).hexdigest() == rec["sha256"]
    sd = tiny_wan_state_dicts()["fun22_camera"]
    # ComfyUI's model_detection: control_adapter without img_emb is camera_2.2, WAN22_Camera's in_dim 36
    assert sd["patch_embedding.weight"].shape[1] == 36 and "control_adapter.conv.weight" in sd
    assert not any(k.startswith("img_emb.") for k in sd)
    info = probe(workspace.models_dir / FILES["fun22_camera"])
    assert (info.arch, info.kind) == ("wan21", "diffusion_model")


def test_the_templates_experts_map_to_it() -> None:
    from scripts import templates_render

    asked = [
        "wan2.2_fun_camera_high_noise_14B_fp8_scaled.safetensors",
        "wan2.2_fun_camera_low_noise_14B_fp8_scaled.safetensors",
    ]
    assert {templates_render.demo_file(n, asked) for n in asked} == {Path(FILES["fun22_camera"]).name}


def test_camera_image_to_video_and_one_step_equal_comfyuis(workspace) -> None:
    from nodes.library.wan_camera import WanCameraEmbedding, WanCameraImageToVideo

    rec = FIXTURE["node"]
    emb = WanCameraEmbedding().execute("Zoom Out", 48, 32, 9)[0]
    vae = make_ref("vae", "qwen_image", [workspace.models_dir / FILES["vae"]])
    cond = [[tensor(FIXTURE["context"]), {}]]
    pos, _, latent = asyncio.run(
        WanCameraImageToVideo().execute(
            cond, cond, vae, 48, 32, 9, 1, start_image=tensor(FIXTURE["start_image"]), camera_conditions=emb
        )
    )
    assert list(latent["samples"].shape) == rec["latent_shape"]
    for key in ("concat_latent_image", "concat_mask", "camera_conditions"):
        ours = pos[0][1][key]
        torch.testing.assert_close(at_recorded(ours, rec[key]), tensor(rec[key]), atol=ATOL, rtol=RTOL, msg=key)
    tensors, (entry,) = flatten("positive", pos, lambda p: 1.0 - p)
    key = entry["key"]
    model = loader.load_diffusion_model(
        make_ref("diffusion_model", "wan21", [workspace.models_dir / FILES["fun22_camera"]])
    )
    step = FIXTURE["step"]
    x, sigma = tensor(step["x"]), torch.tensor([step["sigma"]])
    concat = model.concat_image(tensors[f"{key}.concat_latent_image"], x, tensors[f"{key}.concat_mask"])
    torch.testing.assert_close(at_recorded(concat, step["concat"]), tensor(step["concat"]), atol=ATOL, rtol=RTOL)
    ms = model_sampling_from_config(sampling_config("wan21"))
    cond = {"context": tensor(FIXTURE["context"]), "concat": concat}
    out = model.apply(
        ms.calculate_input(sigma, x),
        ms.timestep(sigma),
        cond | {"camera_conditions": tensors[f"{key}.camera_conditions"]},
    )
    denoised = ms.calculate_denoised(sigma, out, x)
    torch.testing.assert_close(at_recorded(denoised, step["denoised"]), tensor(step["denoised"]), atol=ATOL, rtol=RTOL)
    # the camera conditions act: without them the output is another one
    plain = ms.calculate_denoised(sigma, model.apply(ms.calculate_input(sigma, x), ms.timestep(sigma), cond), x)
    assert float((plain - denoised).abs().max()) > 1e-3
