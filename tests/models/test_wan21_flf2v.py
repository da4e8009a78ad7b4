"""Wan 2.1 FLF2V 14B (first-last-frame-to-video; issue 39) checked against ComfyUI 0.3.64 on wan-tiny's
wan2.1_flf2v_720p_14B_tiny: WanFirstLastFrameToVideo's conditioning, the model's concat and one evaluation with the
CLIP vision states of both frames (514 tokens) and of the start frame alone (257) equal ComfyUI's
(tests/models/fixtures/comfyui_wan21_flf2v.json.xz, recorded by scripts/record_comfyui_wan21_flf2v.py): emb_pos is added
as ComfyUI's MLPProj adds it. templates_render maps the template's file to it."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest
import torch

from nodes.arch import sampling_config
from nodes.loaders import make_ref
from nodes.models import loader
from nodes.models.wan_demo import FILES, build_demo_wan, tiny_wan_state_dicts
from nodes.sampling.model_sampling import model_sampling_from_config
from tests.node_calls import active_workspace
from tests.recorded_tensors import at_recorded, load_json, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_wan21_flf2v.json.xz")
ATOL, RTOL = 2e-5, 1e-4


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """An active workspace holding wan-tiny, whose ModelFns run in-process."""
    yield from active_workspace(tmp_path_factory.mktemp("wan21-flf2v-ws"), build_demo_wan)


def test_the_file_is_the_recorded_one_in_flf2vs_layout(workspace) -> None:
    for part, rec in {"flf2v": FIXTURE["files"]["model"], "vae": FIXTURE["files"]["vae"]}.items():
        assert rec["path"] == FILES[part]
        assert hashlib.sha256((workspace.models_dir / FILES[part]).read_bytes()).hexdigest() == rec["sha256"]
    sd = tiny_wan_state_dicts()["flf2v"]
    # Wan 2.1 FLF2V 14B: img_emb.emb_pos [1, 514, CLIP width] (ComfyUI's flf_pos_embed_token_number), 36 inputs
    assert tuple(sd["img_emb.emb_pos"].shape) == (1, 514, 32) and sd["patch_embedding.weight"].shape[1] == 36


def test_the_templates_file_maps_to_it() -> None:
    from scripts import templates_render

    asked = ["wan2.1_flf2v_720p_14B_fp16.safetensors", "clip_vision_h.safetensors"]
    assert [templates_render.demo_file(n, asked) for n in asked] == [
        Path(FILES["flf2v"]).name,
        "clip-vision-tiny.safetensors",
    ]


def test_first_last_frame_conditioning_and_steps_equal_comfyuis(workspace) -> None:
    from nodes.library.wan import WanFirstLastFrameToVideo

    rec = FIXTURE["node"]
    vae = make_ref("vae", "qwen_image", [workspace.models_dir / FILES["vae"]])
    cond = [[tensor(FIXTURE["context"]), {}]]
    pos, _, latent = asyncio.run(
        WanFirstLastFrameToVideo().execute(
            cond,
            cond,
            vae,
            48,
            32,
            9,
            1,
            start_image=tensor(FIXTURE["start_image"]),
            end_image=tensor(FIXTURE["end_image"]),
        )
    )
    assert list(latent["samples"].shape) == rec["latent_shape"]
    for key in ("concat_latent_image", "concat_mask"):
        ours = pos[0][1][key]
        torch.testing.assert_close(at_recorded(ours, rec[key]), tensor(rec[key]), atol=ATOL, rtol=RTOL, msg=key)
    model = loader.load_diffusion_model(make_ref("diffusion_model", "wan21", [workspace.models_dir / FILES["flf2v"]]))
    x, sigma = tensor(FIXTURE["x"]), torch.tensor([FIXTURE["sigma"]])
    concat = model.concat_image(pos[0][1]["concat_latent_image"], x, pos[0][1]["concat_mask"])
    torch.testing.assert_close(at_recorded(concat, FIXTURE["concat"]), tensor(FIXTURE["concat"]), atol=ATOL, rtol=RTOL)
    ms = model_sampling_from_config(sampling_config("wan21"))
    outs = {}
    for name, step in FIXTURE["steps"].items():
        cond = {"context": tensor(FIXTURE["context"]), "concat": concat, "clip_fea": tensor(step["clip_fea"])}
        out = model.apply(ms.calculate_input(sigma, x), ms.timestep(sigma), cond)
        outs[name] = denoised = ms.calculate_denoised(sigma, out, x)
        torch.testing.assert_close(
            at_recorded(denoised, step["denoised"]), tensor(step["denoised"]), atol=ATOL, rtol=RTOL, msg=name
        )
    assert float((outs["both_frames"] - outs["start_frame"]).abs().max()) > 1e-3
