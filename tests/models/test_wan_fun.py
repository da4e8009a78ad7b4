"""Wan's Fun models (Fun Control 2.1 / 2.2, Fun InP) checked against ComfyUI on wan-tiny's Fun files.

tests/models/fixtures/comfyui_wan_fun.json.xz was recorded by scripts/record_comfyui_wan_fun.py (upstream ComfyUI
0.10.0): the Fun nodes' conditioning and, per Fun model, one denoising evaluation through ComfyUI's model (its
concat_cond and apply_model) on that conditioning."""

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

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_wan_fun.json.xz")
ATOL, RTOL = 2e-5, 1e-4


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """An active workspace holding wan-tiny, whose ModelFns run in-process."""
    yield from active_workspace(tmp_path_factory.mktemp("wan-fun-ws"), build_demo_wan)


def _path(ws, part: str) -> Path:
    return ws.models_dir / FILES[part]


def test_fun_files_are_the_recorded_ones_and_detected(workspace) -> None:
    for part, rec in FIXTURE["files"].items():
        assert rec["path"] == FILES[part]
        assert hashlib.sha256(_path(workspace, part).read_bytes()).hexdigest() == rec["sha256"], (
            f"{FILES[part]} changed: re-record tests/models/fixtures/comfyui_wan_fun.json.xz"
        )
    sds = tiny_wan_state_dicts()
    # ComfyUI's model_detection: in_dim from patch_embedding.weight, in_dim_ref_conv from ref_conv.weight
    assert {p: sds[p]["patch_embedding.weight"].shape[1] for p in ("fun_control", "fun_inp", "fun22_control")} == {
        "fun_control": 48,
        "fun_inp": 36,
        "fun22_control": 52,
    }
    assert sds["fun22_control"]["ref_conv.weight"].shape[1] == 16 and "img_emb.proj.0.bias" not in sds["fun_control"]
    for part in ("fun_control", "fun_inp", "fun22_control"):
        info = probe(_path(workspace, part))
        assert (info.arch, info.kind) == ("wan21", "diffusion_model")


def _run(coro):
    return asyncio.run(coro)


def _node(name: str, ws, case: dict):
    from nodes.library import wan

    vae_part, arch = ("vae22", "wan22_5b") if case is FIXTURE["fun22_control_vae22"] else ("vae", "qwen_image")
    vae = make_ref("vae", arch, [_path(ws, vae_part)])
    cond = [[tensor(FIXTURE["context"]), {}]]
    images = {k: tensor(FIXTURE[k]) for k in case["inputs"]}
    return _run(getattr(wan, name)().execute(cond, cond, vae, 48, 32, 9, 1, **images))


@pytest.mark.parametrize("case", ["fun_control", "fun22_control", "fun22_control_vae22", "fun_inp"])
def test_fun_nodes_equal_comfyuis(workspace, case: str) -> None:
    rec = FIXTURE[case]
    pos, neg, latent = _node(rec["node"], workspace, rec)
    assert list(latent["samples"].shape) == rec["latent_shape"] and not latent["samples"].any()
    for opts in (pos[0][1], neg[0][1]):
        assert sorted(k for k, v in opts.items() if isinstance(v, torch.Tensor)) == sorted(rec["opts"])
        for key, want in rec["opts"].items():
            torch.testing.assert_close(opts[key], tensor(want), atol=ATOL, rtol=RTOL, msg=f"{case} {key}")
        assert opts.get("concat_mask_index", 0) == rec["mask_index"]


@pytest.mark.parametrize(
    "case,part", [("fun_control", "fun_control"), ("fun22_control", "fun22_control"), ("fun_inp", "fun_inp")]
)
def test_one_fun_step_equals_comfyuis(workspace, case: str, part: str) -> None:
    """The node's conditioning as the sampler hands it to the model (nodes.conditioning.flatten's tensors and
    entry, concat_mask_index included), the model's concat and one evaluation to the denoised prediction."""
    rec = FIXTURE[case]
    pos, _, _ = _node(rec["node"], workspace, rec)
    tensors, (entry,) = flatten("positive", pos, lambda p: 1.0 - p)
    model = loader.load_diffusion_model(make_ref("diffusion_model", "wan21", [_path(workspace, part)]))
    x, sigma = tensor(rec["step"]["x"]), torch.tensor([rec["step"]["sigma"]])
    key = entry["key"]
    concat = model.concat_image(
        tensors.get(f"{key}.concat_latent_image"),
        x,
        tensors.get(f"{key}.concat_mask"),
        entry.get("concat_mask_index", 0),
    )
    torch.testing.assert_close(concat, tensor(rec["step"]["concat"]), atol=ATOL, rtol=RTOL)
    ms = model_sampling_from_config(sampling_config("wan21"))
    out = model.apply(
        ms.calculate_input(sigma, x), ms.timestep(sigma), {"context": tensor(FIXTURE["context"]), "concat": concat}
    )
    torch.testing.assert_close(
        ms.calculate_denoised(sigma, out, x), tensor(rec["step"]["denoised"]), atol=ATOL, rtol=RTOL
    )


REF = load_json(Path(__file__).parent / "fixtures" / "comfyui_wan_fun_ref.json.xz")


def test_wan22_fun_control_reference_image_equals_comfyuis(workspace) -> None:
    """Wan22FunControlToVideo's ref_image (recorded by scripts/record_comfyui_wan_fun_ref.py): its encoded
    latent appended to both sides' reference latents, and one evaluation of the model, whose ref_conv puts the
    reference's tokens before the video's (rotary positions one frame longer), to ComfyUI's denoised."""
    from nodes.library.wan import Wan22FunControlToVideo

    for part, rec in REF["files"].items():
        assert hashlib.sha256(_path(workspace, part).read_bytes()).hexdigest() == rec["sha256"]
    vae = make_ref("vae", "qwen_image", [_path(workspace, "vae")])
    context = tensor(REF["context"])
    cond = [[context, {}]]
    pos, neg, latent = _run(
        Wan22FunControlToVideo().execute(
            cond,
            cond,
            vae,
            48,
            32,
            5,
            1,
            ref_image=tensor(REF["ref_image"]),
            control_video=tensor(REF["control_video"]),
        )
    )
    assert list(latent["samples"].shape) == REF["latent_shape"]
    for side, want in ((pos, REF["reference_latents"]), (neg, REF["neg_reference_latents"])):
        assert len(side[0][1]["reference_latents"]) == len(want)
        for got, rec in zip(side[0][1]["reference_latents"], want, strict=True):
            torch.testing.assert_close(got, tensor(rec), atol=1e-5, rtol=1e-5)
    tensors, (entry,) = flatten("positive", pos, lambda p: 1.0 - p)
    model = loader.load_diffusion_model(make_ref("diffusion_model", "wan21", [_path(workspace, "fun22_control")]))
    step = REF["step"]
    x, sigma = tensor(step["x"]), torch.tensor([step["sigma"]])
    key = entry["key"]
    concat = model.concat_image(
        tensors.get(f"{key}.concat_latent_image"), x, tensors.get(f"{key}.concat_mask"), entry["concat_mask_index"]
    )
    refs = [model.latent_format.process_in(tensors[f"{key}.ref.{i}"]) for i in range(entry["ref_latents"])]
    torch.testing.assert_close(refs[-1][:, :, 0], tensor(step["reference_latent"]), atol=1e-5, rtol=1e-5)
    ms = model_sampling_from_config(sampling_config("wan21"))
    cond = {"context": context, "concat": concat, "ref_latents": refs}
    out = model.apply(ms.calculate_input(sigma, x), ms.timestep(sigma), cond)
    torch.testing.assert_close(ms.calculate_denoised(sigma, out, x), tensor(step["denoised"]), atol=1e-5, rtol=1e-5)
    without = model.apply(ms.calculate_input(sigma, x), ms.timestep(sigma), {"context": context, "concat": concat})
    assert not torch.allclose(without, out, atol=1e-3)  # the reference changes the prediction


@pytest.mark.parametrize("index", range(len(FIXTURE["camera"]["embeddings"])))
def test_camera_embedding_equals_comfyuis(index: int) -> None:
    from nodes.library.wan_camera import WanCameraEmbedding

    rec = FIXTURE["camera"]["embeddings"][index]
    pose, width, height, length, extra = rec["args"]
    emb, *rest = WanCameraEmbedding().execute(pose, width, height, length, **extra)
    torch.testing.assert_close(at_recorded(emb, rec["out"]), tensor(rec["out"]), atol=ATOL, rtol=RTOL)
    assert list(rest) == rec["rest"]


def test_camera_embedding_refuses_bad_input() -> None:
    from nodes.library.wan_camera import WanCameraEmbedding

    with pytest.raises(ValueError, match="camera_pose"):
        WanCameraEmbedding().execute("Dolly Zoom", 32, 32, 5)
    with pytest.raises(ValueError, match="length"):
        WanCameraEmbedding().execute("Static", 32, 32, 6)


def test_camera_image_to_video_and_one_camera_step_equal_comfyuis(workspace) -> None:
    """WanCameraImageToVideo's conditioning, then through flatten (camera_conditions carried), the Fun Camera
    model's concat and one evaluation with its control adapter and CLIP vision states."""
    from nodes.library.wan_camera import WanCameraEmbedding, WanCameraImageToVideo

    rec = FIXTURE["camera"]
    emb = WanCameraEmbedding().execute("Zoom Out", 48, 32, 9)[0]
    vae = make_ref("vae", "qwen_image", [_path(workspace, "vae")])
    cond = [[tensor(FIXTURE["context"]), {}]]
    pos, neg, latent = _run(
        WanCameraImageToVideo().execute(
            cond, cond, vae, 48, 32, 9, 1, start_image=tensor(FIXTURE["start_image"]), camera_conditions=emb
        )
    )
    assert list(latent["samples"].shape) == rec["node"]["latent_shape"]
    for opts in (pos[0][1], neg[0][1]):
        for key in ("concat_latent_image", "concat_mask", "camera_conditions"):
            want = rec["node"][key]
            torch.testing.assert_close(at_recorded(opts[key], want), tensor(want), atol=ATOL, rtol=RTOL, msg=key)
    tensors, (entry,) = flatten("positive", pos, lambda p: 1.0 - p)
    key = entry["key"]
    model = loader.load_diffusion_model(make_ref("diffusion_model", "wan21", [_path(workspace, "fun_camera")]))
    step = rec["step"]
    x, sigma = tensor(step["x"]), torch.tensor([step["sigma"]])
    concat = model.concat_image(tensors[f"{key}.concat_latent_image"], x, tensors[f"{key}.concat_mask"])
    torch.testing.assert_close(concat, tensor(step["concat"]), atol=ATOL, rtol=RTOL)
    ms = model_sampling_from_config(sampling_config("wan21"))
    out = model.apply(
        ms.calculate_input(sigma, x),
        ms.timestep(sigma),
        {
            "context": tensor(FIXTURE["context"]),
            "concat": concat,
            "clip_fea": tensor(step["clip_fea"]),
            "camera_conditions": tensors[f"{key}.camera_conditions"],
        },
    )
    torch.testing.assert_close(ms.calculate_denoised(sigma, out, x), tensor(step["denoised"]), atol=ATOL, rtol=RTOL)
    plain = loader.load_diffusion_model(make_ref("diffusion_model", "wan21", [_path(workspace, "t2v")]))
    with pytest.raises(ValueError, match="camera"):  # a model without the adapter refuses camera conditions
        plain.apply(
            x,
            torch.tensor([500.0]),
            {"context": tensor(FIXTURE["context"]), "camera_conditions": tensors[f"{key}.camera_conditions"]},
        )


def test_clip_vision_features_are_ignored_by_a_model_without_an_image_embedder(workspace) -> None:
    """The Fun InP template feeds CLIP vision output to WanFunInpaintToVideo; the 1.3B Fun model has no image
    embedder, and ComfyUI then leaves the features out (they raised TypeError in diffusers' embedder here)."""
    rec = FIXTURE["fun_inp"]
    model = loader.load_diffusion_model(make_ref("diffusion_model", "wan21", [_path(workspace, "fun_inp")]))
    assert model.module.condition_embedder.image_embedder is None
    x, sigma = tensor(rec["step"]["x"]), torch.tensor([rec["step"]["sigma"]])
    ms = model_sampling_from_config(sampling_config("wan21"))
    cond = {"context": tensor(FIXTURE["context"]), "concat": tensor(rec["step"]["concat"])}
    plain = model.apply(ms.calculate_input(sigma, x), ms.timestep(sigma), cond)
    with_clip = model.apply(
        ms.calculate_input(sigma, x), ms.timestep(sigma), {**cond, "clip_fea": torch.randn(1, 257, 1280)}
    )
    assert torch.equal(plain, with_clip)
