"""VOID's nodes (nodes/library/void.py) against the newest ComfyUI's comfy_extras/nodes_void.py, run at development
time on ComfyUI 0.10.0 with the tiny Wan 2.1 files (scripts/record_comfyui_void.py, fixture
tests/nodes/fixtures/comfyui_void.json.xz): the quadmask levels, the inpainting conds and latent through the tiny
VAE, and VOID's DDIM sampled by SamplerCustomAdvanced from RandomNoise and from VOIDWarpedNoiseSource."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest
import torch

from nodes.library.void import VOIDInpaintConditioning, VOIDQuadmaskPreprocess, void_length
from tests.float_tolerance import ulps_of_largest
from tests.node_calls import active_workspace, call_node
from tests.recorded_tensors import load_json, tensor

RAFT_FILE = "optical_flow/raft_large_C_T_SKHT_V2-ff5fadd5.safetensors"
FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_void.json.xz")
ATOL = 1e-5  # two implementations of the same float32 VAE / network on the same file
# three steps of the network through a CFG of 3: measured 8.1e-6 at a largest value of 11.7 (8.5 ulps) on this CPU;
# another CPU's kernels sum in another order (tests/float_tolerance.py)
SAMPLED_ULPS = 16


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    from nodes.models.raft_demo import build_demo_raft
    from nodes.models.wan_demo import build_demo_wan

    ws_iter = active_workspace(tmp_path_factory.mktemp("void"), build_demo_wan, build_demo_raft)
    ws = next(ws_iter)
    for path, digest in FIXTURE["sha256"].items():
        assert hashlib.sha256((ws.models_dir / path).read_bytes()).hexdigest() == digest, f"{path}: re-record"
    yield ws
    next(ws_iter, None)


def inpaint_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    """The recorder's seeded 11-frame video and binary mask video (scripts/record_comfyui_void.py)."""
    gen = torch.Generator().manual_seed(19)
    return torch.rand(11, 40, 56, 3, generator=gen), (torch.rand(11, 40, 56, generator=gen) > 0.6).float()


def moving_video() -> torch.Tensor:
    """The recorder's 5 frames of a seeded picture moving sideways."""
    picture = torch.rand(264, 272, 3, generator=torch.Generator().manual_seed(17))
    picture = (picture + torch.roll(picture, 9, dims=1)) / 2
    return torch.stack([torch.roll(picture, 4 * i, dims=1) for i in range(5)])


def test_lengths_are_cut_to_an_even_latent_frame_count() -> None:
    assert [void_length(n) for n in (1, 5, 9, 11, 13, 45, 49)] == [5, 5, 5, 5, 13, 45, 45]


@pytest.mark.parametrize("case", list(FIXTURE["quadmask"]["cases"]))
def test_quadmask_levels_equal_comfyui(case: str) -> None:
    name, dilate = case.rsplit("_dilate", 1)
    (ours,) = VOIDQuadmaskPreprocess().execute(tensor(FIXTURE["quadmask"]["inputs"][name]), int(dilate))
    assert torch.equal(ours, tensor(FIXTURE["quadmask"]["cases"][case]))


def test_inpaint_conditioning_equals_comfyui(workspace, fixed_threads) -> None:
    rec = FIXTURE["inpaint"]
    (vae,) = asyncio.run(call_node("VAELoader", vae_name="wan_2.1_vae_tiny.safetensors"))
    text = [[torch.zeros(1, 5, 8), {"pooled_output": None}]]
    pos, neg, latent = asyncio.run(VOIDInpaintConditioning().execute(text, text, vae, *inpaint_inputs(), 48, 32, 11, 2))
    for ours, theirs in ((pos, rec["positive"]), (neg, rec["negative"])):
        ((_, opts),) = ours
        (expected,) = theirs
        assert sorted(opts) == sorted(expected)
        assert opts["concat_latent_image"].shape == (1, 32, 2, 4, 6)
        torch.testing.assert_close(
            opts["concat_latent_image"], tensor(expected["concat_latent_image"]), atol=ATOL, rtol=0
        )
    assert torch.equal(latent["samples"], tensor(rec["latent"]))


@pytest.mark.parametrize("case", ["random_noise", "warped_noise"])
def test_void_ddim_sampling_equals_comfyui(workspace, fixed_threads, case: str) -> None:
    rec = FIXTURE["sampling"]

    async def run():
        (model,) = await call_node("UNETLoader", unet_name="wan2.1_t2v_1.3B_tiny.safetensors", weight_dtype="default")
        (clip,) = await call_node("CLIPLoader", clip_name="umt5_xxl_tiny.safetensors", type="wan", device="default")
        (pos,) = await call_node("CLIPTextEncode", clip=clip, text="a red cube on a wooden table")
        (neg,) = await call_node("CLIPTextEncode", clip=clip, text="")
        (guider,) = await call_node("CFGGuider", model=model, positive=pos, negative=neg, cfg=3.0)
        (sigmas,) = await call_node("BasicScheduler", model=model, scheduler="simple", steps=3, denoise=1.0)
        (sampler,) = await call_node("VOIDSampler")
        if case == "random_noise":
            (noise,) = await call_node("RandomNoise", noise_seed=43)
        else:
            (noise,) = await call_node("VOIDWarpedNoiseSource", warped_noise={"samples": tensor(rec["warped"])})
        torch.testing.assert_close(sigmas, tensor(rec["sigmas"]), atol=0, rtol=0)
        empty = {"samples": torch.zeros(1, 16, 2, 4, 6)}
        return await call_node(
            "SamplerCustomAdvanced", noise=noise, guider=guider, sampler=sampler, sigmas=sigmas, latent_image=empty
        )

    out, denoised = asyncio.run(run())
    for ours, key in ((out, "output"), (denoised, "denoised")):
        expected = tensor(rec["cases"][case][key])
        atol = max(ATOL, ulps_of_largest(expected, SAMPLED_ULPS))
        torch.testing.assert_close(ours["samples"], expected, atol=atol, rtol=0)


def _warp_frames() -> torch.Tensor:
    """The moving video as VOIDWarpedNoise takes it at 256x256: uint8 frames."""
    from nodes.library.void import _frames_at

    return (_frames_at(moving_video(), 256, 256).clamp(0, 1) * 255).to(torch.uint8)


def test_raft_flows_equal_comfyuis(workspace) -> None:
    """RAFT-large (12 updates, convex upsampling) on the frames the warp sees (halved, area), against torchvision's
    RAFT as ComfyUI runs it; at the recording's 2 threads the flows are equal bit for bit, at 1 thread 3.3e-5 apart
    at most (largest 0.3: RAFT's recurrent updates carry the sums' rounding)."""
    import torch.nn.functional as F

    from nodes.library.void import _read, raft_flow
    from nodes.models.raft import load_raft

    torch.set_num_threads(2)
    raft = load_raft(_read(workspace.models_dir / RAFT_FILE))
    pictures = F.interpolate(_warp_frames().permute(0, 3, 1, 2).float() / 255, size=(128, 128), mode="area")
    expected = [tensor(f) for f in FIXTURE["warped_noise"]["flows"]]
    assert len(expected) == len(pictures) - 1 == 4
    for a, b, theirs in zip(pictures[:-1], pictures[1:], expected, strict=True):
        torch.testing.assert_close(raft_flow(raft, a, b), theirs, atol=1e-4, rtol=0)


def test_warped_noise_equals_comfyuis(workspace, monkeypatch, fixed_threads) -> None:
    """OpticalFlowLoader + VOIDWarpedNoise, the warp fed the flows ComfyUI's RAFT gave (the warp rounds positions,
    so flows a few ulps apart, as two CPUs' sums are, may move a pixel): its noise bit for bit, both copies."""
    from nodes.library import void

    flows = iter(tensor(f) for f in FIXTURE["warped_noise"]["flows"])
    monkeypatch.setattr(void, "raft_flow", lambda raft, a, b: next(flows))
    (flow,) = void.OpticalFlowLoader().execute(RAFT_FILE.split("/")[1])
    (latent,) = void.VOIDWarpedNoise().execute(flow, moving_video(), 256, 256, 7, 2)
    expected = tensor(FIXTURE["warped_noise"]["warped_noise"])
    assert latent["samples"].shape == (2, 16, 2, 32, 32)
    assert torch.equal(latent["samples"], expected.expand(2, -1, -1, -1, -1))
