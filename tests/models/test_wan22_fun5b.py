"""Wan 2.2 Fun 5B Control and InP against ComfyUI 0.3.64 on wan-tiny's wan2.2_fun_control_5B_tiny and
wan2.2_fun_inpaint_5B_tiny with the tiny Wan 2.2 VAE (tests/models/fixtures/comfyui_wan22_fun5b.json.xz, a thin
fixture of ComfyUI's outputs written by scripts/record_comfyui_wan22_fun5b.py; the seeded inputs are drawn again
here as it draws them). ComfyUI detects both files as WAN22_T2V (48 channels out, no image embedding) and feeds
their extra input channels through WAN22's concat_cond: Control's 148 = noise, control latent, 4 mask channels at
concat_mask_index 48, start latent, with a 48-channel ref_conv for the reference image; InP's 100 = noise, 4 mask
channels, start/end latent. Checked: the detected sizes, Wan22FunControlToVideo's and WanFunInpaintToVideo's
conditioning on the 48-channel VAE, and one evaluation of each model to the denoised prediction at sigma 0.6."""

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
from tests.recorded_tensors import load_json, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_wan22_fun5b.json.xz")
PARTS = {"control": "fun22_5b_control", "inpaint": "fun22_5b_inpaint", "vae22": "vae22"}
ATOL = RTOL = 1e-5


def _inputs() -> dict[str, torch.Tensor]:
    """The recorder's seeded inputs (scripts/record_comfyui_wan22_fun5b.py `inputs`), drawn the same way."""

    def rand(seed: int, *shape: int) -> torch.Tensor:
        return torch.rand(*shape, generator=torch.Generator().manual_seed(seed))

    return {
        "context": torch.randn(1, 512, 32, generator=torch.Generator().manual_seed(60)),
        "control_video": rand(61, 5, 40, 56, 3),
        "ref_image": rand(62, 1, 50, 30, 3),
        "start_image": rand(63, 1, 40, 70, 3),
        "end_image": rand(64, 1, 52, 52, 3),
        "x": torch.randn(1, 48, 2, 4, 6, generator=torch.Generator().manual_seed(65)),
    }


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """An active workspace holding wan-tiny, whose ModelFns run in-process."""
    yield from active_workspace(tmp_path_factory.mktemp("wan-fun5b-ws"), build_demo_wan)


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _path(ws, name: str) -> Path:
    return ws.models_dir / FILES[PARTS[name]]


def test_files_are_the_recorded_ones_with_comfyuis_sizes(workspace) -> None:
    for name, rec in FIXTURE["files"].items():
        assert rec["path"] == FILES[PARTS[name]]
        assert hashlib.sha256(_path(workspace, name).read_bytes()).hexdigest() == rec["sha256"], (
            f"{rec['path']} changed: re-record tests/models/fixtures/comfyui_wan22_fun5b.json.xz"
        )
    sds = tiny_wan_state_dicts()
    for name in ("control", "inpaint"):
        rec = FIXTURE[name]
        assert (rec["model_config"], rec["model"]) == ("WAN22_T2V", "WAN22")
        sd = sds[PARTS[name]]
        assert sd["patch_embedding.weight"].shape[1] == rec["in_dim"] and "img_emb.proj.0.bias" not in sd
        assert sd["head.head.weight"].shape[0] == 48 * 4
        assert (probe(_path(workspace, name)).arch, probe(_path(workspace, name)).kind) == (
            "wan22_5b",
            "diffusion_model",
        )
    assert sds[PARTS["control"]]["ref_conv.weight"].shape[1] == 48 and "ref_conv.weight" not in sds[PARTS["inpaint"]]


def _conditioning(ws, name: str):
    from nodes.library.wan import Wan22FunControlToVideo, WanFunInpaintToVideo

    seeded = _inputs()
    vae = make_ref("vae", "wan22_5b", [_path(ws, "vae22")])
    cond = [[seeded["context"], {}]]
    node, images = {
        "control": (Wan22FunControlToVideo, ("control_video", "ref_image")),
        "inpaint": (WanFunInpaintToVideo, ("start_image", "end_image")),
    }[name]
    return asyncio.run(node().execute(cond, cond, vae, 96, 64, 5, 1, **{k: seeded[k] for k in images}))


@pytest.mark.parametrize("name", ["control", "inpaint"])
def test_conditioning_and_one_step_equal_comfyuis(workspace, name: str) -> None:
    rec = FIXTURE[name]
    seeded = _inputs()
    pos, neg, latent = _conditioning(workspace, name)
    assert list(latent["samples"].shape) == rec["latent_shape"] and not latent["samples"].any()
    for opts in (pos[0][1], neg[0][1]):
        tensors = {k: v for k, v in opts.items() if isinstance(v, torch.Tensor)}
        assert sorted(tensors) == sorted(rec["opts"])
        for key, want in rec["opts"].items():
            torch.testing.assert_close(tensors[key], tensor(want), atol=ATOL, rtol=RTOL, msg=f"{name} {key}")
        assert opts.get("concat_mask_index", 0) == rec["mask_index"]
        got_refs = opts.get("reference_latents") or []
        assert len(got_refs) == len(rec["reference_latents"])
        for got, want in zip(got_refs, rec["reference_latents"], strict=True):
            torch.testing.assert_close(got, tensor(want), atol=ATOL, rtol=RTOL)

    tensors, (entry,) = flatten("positive", pos, lambda p: 1.0 - p)
    key = entry["key"]
    model = loader.load_diffusion_model(make_ref("diffusion_model", "wan22_5b", [_path(workspace, name)]))
    x, sigma = seeded["x"], torch.tensor([0.6])
    concat = model.concat_image(
        tensors.get(f"{key}.concat_latent_image"),
        x,
        tensors.get(f"{key}.concat_mask"),
        entry.get("concat_mask_index", 0),
    )
    torch.testing.assert_close(concat, tensor(rec["concat"]), atol=ATOL, rtol=RTOL)
    cond = {"context": seeded["context"], "concat": concat}
    if rec["reference_latent"] is not None:
        refs = [model.latent_format.process_in(tensors[f"{key}.ref.{i}"]) for i in range(entry["ref_latents"])]
        torch.testing.assert_close(refs[-1][:, :, 0], tensor(rec["reference_latent"]), atol=ATOL, rtol=RTOL)
        cond["ref_latents"] = refs
    ms = model_sampling_from_config(sampling_config("wan22_5b"))
    out = model.apply(ms.calculate_input(sigma, x), ms.timestep(sigma), cond)
    denoised = ms.calculate_denoised(sigma, out, x)
    torch.testing.assert_close(denoised, tensor(rec["denoised"]), atol=ATOL, rtol=RTOL)
    if "ref_latents" in cond:  # the reference image changes the prediction
        without = model.apply(
            ms.calculate_input(sigma, x), ms.timestep(sigma), {"context": seeded["context"], "concat": concat}
        )
        assert not torch.allclose(without, out, atol=1e-3)
