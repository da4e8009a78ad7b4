"""WanPhantomSubjectToVideo and WanTrackToVideo checked against ComfyUI 0.3.64 on wan-tiny.

tests/models/fixtures/comfyui_wan_phantom_track.json.xz was recorded by scripts/record_comfyui_wan_phantom_track.py:
the nodes' conditioning, one model evaluation on each (the Phantom subject frames after the video's; the tracked
image-to-video concat) and KSampler with the Phantom conditioning."""

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
from nodes.models.components import WAN21_LATENT
from nodes.models.wan_demo import FILES, build_demo_wan
from nodes.sampling.model_sampling import model_sampling_from_config
from tests.node_calls import active_workspace
from tests.recorded_tensors import load_json, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_wan_phantom_track.json.xz")
ATOL, RTOL = 1e-5, 1e-5


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    yield from active_workspace(tmp_path_factory.mktemp("wan-phantom-ws"), build_demo_wan)


@pytest.fixture
def fixed_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _run(coro):
    return asyncio.run(coro)


def _vae(ws):
    return make_ref("vae", "qwen_image", [ws.models_dir / FILES["vae"]])


def test_files_are_the_recorded_ones(workspace) -> None:
    for part, rec in FIXTURE["files"].items():
        assert rec["path"] == FILES[part]
        assert hashlib.sha256((workspace.models_dir / FILES[part]).read_bytes()).hexdigest() == rec["sha256"], (
            f"{FILES[part]} changed: re-record {FIXTURE['recorded_by']}"
        )


def _phantom(ws):
    from nodes.library.wan_phantom import WanPhantomSubjectToVideo

    cond, negative = [[tensor(FIXTURE["context"]), {}]], [[tensor(FIXTURE["negative"]), {}]]
    return _run(
        WanPhantomSubjectToVideo().execute(cond, negative, _vae(ws), 48, 32, 9, 2, images=tensor(FIXTURE["subjects"]))
    )


def test_phantom_conditionings_equal_comfyuis(workspace) -> None:
    rec = FIXTURE["phantom"]
    pos, neg_text, neg_img, latent = _phantom(workspace)
    assert list(latent["samples"].shape) == rec["latent_shape"] and not latent["samples"].any()
    for name, side in (("positive", pos), ("negative_text", neg_text), ("negative_img_text", neg_img)):
        torch.testing.assert_close(side[0][1]["time_dim_concat"], tensor(rec[name]), atol=ATOL, rtol=RTOL, msg=name)
    assert torch.equal(neg_text[0][0], tensor(FIXTURE["negative"])) == rec["negative_text_context_is_negative"]
    # without images: no subject frames anywhere, the negative passed through as the first negative
    from nodes.library.wan_phantom import WanPhantomSubjectToVideo

    cond = [[tensor(FIXTURE["context"]), {}]]
    out = _run(WanPhantomSubjectToVideo().execute(cond, cond, _vae(workspace), 48, 32, 9, 1))
    assert all("time_dim_concat" not in c[0][1] for c in out[:3])


def test_phantom_subject_frames_reach_the_model_as_comfyuis(workspace, fixed_threads) -> None:
    """The conditioning as the sampler flattens it, and one evaluation with the subject frames after the video's
    (in model space, cut back to the video's frames), to ComfyUI's denoised; without them it is far off."""
    rec = FIXTURE["phantom"]
    pos, *_ = _phantom(workspace)
    tensors, (entry,) = flatten("positive", pos, lambda p: 1.0 - p)
    subjects = tensors[f"{entry['key']}.time_dim_concat"]
    model = loader.load_diffusion_model(make_ref("diffusion_model", "wan21", [workspace.models_dir / FILES["t2v"]]))
    ms = model_sampling_from_config(sampling_config("wan21"))
    x, sigma = tensor(rec["step"]["x"]), torch.tensor([rec["step"]["sigma"]])
    cond = {"context": tensor(FIXTURE["context"]).repeat(2, 1, 1)}

    def denoised(extra: dict) -> torch.Tensor:
        return ms.calculate_denoised(sigma, model.apply(ms.calculate_input(sigma, x), ms.timestep(sigma), extra), x)

    ours = denoised({**cond, "time_dim_concat": WAN21_LATENT.process_in(subjects).repeat(2, 1, 1, 1, 1)})
    assert ours.shape == x.shape
    torch.testing.assert_close(ours, tensor(rec["step"]["denoised"]), atol=ATOL, rtol=RTOL)
    assert (denoised(cond) - tensor(rec["step"]["denoised"])).abs().max() > 1e-2


def test_subject_frames_on_an_image_to_video_model_are_refused_by_name(workspace) -> None:
    model = loader.load_diffusion_model(make_ref("diffusion_model", "wan21", [workspace.models_dir / FILES["i2v_21"]]))
    x = torch.zeros(1, 16, 3, 4, 6)
    cond = {
        "context": tensor(FIXTURE["context"]),
        "concat": model.concat_image(None, x),
        "time_dim_concat": torch.zeros(1, 16, 2, 4, 6),
    }
    with pytest.raises(ValueError, match="time_dim_concat"):
        model.apply(x, torch.tensor([500.0]), cond)


@pytest.mark.parametrize("negative", ["negative_img_text", "negative_text"])
def test_ksampler_with_phantom_conditioning_equals_comfyuis(workspace, fixed_threads, negative: str) -> None:
    from nodes.loaders import UNETLoader
    from nodes.model_nodes import KSampler

    pos, neg_text, neg_img, latent = _phantom(workspace)
    (unet,) = UNETLoader().load_unet(Path(FILES["t2v"]).name, "default")
    neg = neg_img if negative == "negative_img_text" else neg_text
    (out,) = _run(KSampler().sample(unet, 42, 2, 3.5, "euler", "simple", pos, neg, latent))
    key = "ksampler" if negative == "negative_img_text" else "ksampler_negative_text"
    torch.testing.assert_close(out["samples"], tensor(FIXTURE["phantom"][key]), atol=ATOL, rtol=RTOL)


def _track(ws, args: list):
    from nodes.library.wan_track import WanTrackToVideo

    cond = [[tensor(FIXTURE["context"]), {}]]
    return _run(WanTrackToVideo().execute(cond, cond, _vae(ws), *args, start_image=tensor(FIXTURE["start_image"])))


@pytest.mark.parametrize("case", sorted(FIXTURE["track"]))
def test_track_conditioning_equals_comfyuis(workspace, case: str) -> None:
    rec = FIXTURE["track"][case]
    pos, neg, latent = _track(workspace, rec["args"])
    assert list(latent["samples"].shape) == rec["latent_shape"] and not latent["samples"].any()
    opts = pos[0][1]
    assert sorted(k for k, v in opts.items() if isinstance(v, torch.Tensor)) == sorted(rec["opts"])
    for key, want in rec["opts"].items():
        torch.testing.assert_close(opts[key], tensor(want), atol=ATOL, rtol=RTOL, msg=f"{case} {key}")
    assert all(torch.equal(opts[k], neg[0][1][k]) for k in rec["opts"]) == rec["neg_equal"]


def test_one_step_on_tracked_conditioning_equals_comfyuis(workspace, fixed_threads) -> None:
    rec = FIXTURE["track"]["three_tracks"]
    pos, _, _ = _track(workspace, rec["args"])
    tensors, (entry,) = flatten("positive", pos, lambda p: 1.0 - p)
    key = entry["key"]
    model = loader.load_diffusion_model(make_ref("diffusion_model", "wan21", [workspace.models_dir / FILES["i2v_21"]]))
    x, sigma = tensor(rec["step"]["x"]), torch.tensor([rec["step"]["sigma"]])
    concat = model.concat_image(tensors[f"{key}.concat_latent_image"], x, tensors[f"{key}.concat_mask"])
    torch.testing.assert_close(concat, tensor(rec["step"]["concat"]), atol=ATOL, rtol=RTOL)
    ms = model_sampling_from_config(sampling_config("wan21"))
    out = model.apply(
        ms.calculate_input(sigma, x),
        ms.timestep(sigma),
        {"context": tensor(rec["step"]["context"]), "concat": concat, "clip_fea": tensor(rec["step"]["clip_fea"])},
    )
    torch.testing.assert_close(
        ms.calculate_denoised(sigma, out, x), tensor(rec["step"]["denoised"]), atol=ATOL, rtol=RTOL
    )


@pytest.mark.parametrize(
    "tracks,message",
    [('{"x": 1, "y": 2}', "JSON list of tracks"), ('[[{"x": 1}]]', "list of"), ("[[1, 2]]", "list of")],
)
def test_bad_tracks_are_named(workspace, tracks: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _track(workspace, [tracks, 48, 32, 9, 1, 220.0, 2])


def test_length_must_fit_the_vae_groups(workspace) -> None:
    with pytest.raises(ValueError, match="length"):
        _track(workspace, ['[{"x": 1, "y": 2}]', 48, 32, 7, 1, 220.0, 2])
