"""Cosmos Predict2 (nodes/models/cosmos_predict2.py): detection from the published layout, and the DiT's step on
diffusers' CosmosTransformer3DModel equal to ComfyUI 0.3.64's MiniTrainDIT within 1e-5 on the tiny demo files
(tests/models/fixtures/comfyui_cosmos_predict2.json.xz, recorded by scripts/record_comfyui_cosmos_predict2.py):
the network's raw output, and the denoised step output with the rectified flow's scaling; image-to-video under a
noise mask keeping its first latent frame (the inverted mask joined, per-frame timesteps)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch

from tests.recorded_tensors import load_json, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_cosmos_predict2.json.xz")
T2I = "diffusion_models/cosmos_predict2_2B_t2i_tiny.safetensors"
I2V = "diffusion_models/cosmos_predict2_2B_video2world_tiny.safetensors"


def load(ws, rel: str):
    from nodes.loaders import make_ref
    from nodes.models.loader import load_diffusion_model

    return load_diffusion_model(make_ref("diffusion_model", "cosmos_predict2", [ws.models_dir / rel]))


def test_fixture_was_recorded_on_these_files(demo_workspace) -> None:
    for rel, digest in FIXTURE["sha256"].items():
        assert hashlib.sha256((demo_workspace.models_dir / rel).read_bytes()).hexdigest() == digest, rel


def test_detection_reads_the_published_keys(demo_workspace, tmp_path) -> None:
    from safetensors.torch import save_file

    from nodes.models.detect import probe

    for rel in (T2I, I2V):
        info = probe(demo_workspace.models_dir / rel)
        assert (info.arch, info.kind, info.prefix) == ("cosmos_predict2", "diffusion_model", "net.")
    # the same keys with the LLM adapter are Anima's
    assert probe(demo_workspace.models_dir / "diffusion_models/anima_tiny.safetensors").arch == "anima"
    # ComfyUI's own prefix and a bare file are read too
    for prefix in ("model.diffusion_model.", ""):
        path = tmp_path / f"cosmos{len(prefix)}.safetensors"
        keys = ("blocks.0.mlp.layer1.weight", "x_embedder.proj.1.weight")
        save_file({prefix + k: torch.zeros(4, 68) for k in keys}, str(path))
        assert (probe(path).arch, probe(path).prefix) == ("cosmos_predict2", prefix)


def test_config_follows_comfyuis_table(demo_workspace) -> None:
    t2i, i2v = load(demo_workspace, T2I), load(demo_workspace, I2V)
    assert (t2i.config["in_channels"], i2v.config["in_channels"]) == (17, 18)
    assert t2i.config["rope_scale"] == (1.0, 4.0, 4.0)
    assert i2v.config["rope_scale"] == (1.0, 1.0, 1.0)  # 0.3.64 sets 3.0 / 2.0 only at the 2B / 14B widths
    recorded = FIXTURE["cases"]["t2i"]["config"]
    assert (recorded["image_model"], recorded["model_channels"]) == ("cosmos_predict2", 192)
    assert t2i.config["num_layers"] == recorded.get("num_blocks", 10)


# (seed, latent shape, context rows), as the recorder draws its inputs
CASES = {
    "t2i": (1, [1, 16, 1, 8, 8], 7),
    "t2i_batch_two": (2, [2, 16, 1, 6, 10], 5),
    "i2v": (3, [1, 16, 3, 6, 8], 6),
    "i2v_no_mask": (4, [1, 16, 2, 4, 4], 4),
}


@pytest.mark.parametrize("case", sorted(FIXTURE["cases"]))
def test_step_equals_comfyuis(demo_workspace, case: str) -> None:
    torch.set_num_threads(1)
    want = FIXTURE["cases"][case]
    model = load(demo_workspace, want["file"])
    ms = model_sampling(model)
    seed, shape, rows = CASES[case]
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=gen)
    context = torch.randn([shape[0], rows, 1024], generator=gen)
    sigma = torch.full([x.shape[0]], want["sigma"])
    mask = None
    if want["keeps_first_frame"]:
        mask = torch.ones([shape[0], 1, *shape[2:]])
        mask[:, :, :1] = 0.0
    raw_x = x
    if model.config["in_channels"] == 18:  # the image-to-video network also takes 1 - mask (zeros without one)
        raw_x = torch.cat([x, torch.zeros_like(x[:, :1]) if mask is None else 1.0 - mask], dim=1)
    with torch.no_grad():
        t = ms.timestep(sigma)
        torch.testing.assert_close(t.float(), tensor(want["raw_t"]), atol=1e-7, rtol=0)
        raw = model.module(
            hidden_states=torch.cat([raw_x, torch.zeros_like(x[:, :1])], dim=1),
            timestep=t,
            encoder_hidden_states=context,
            return_dict=False,
        )[0]
        xc = ms.calculate_input(sigma, x)
        cond = {"context": context} if mask is None else {"context": context, "denoise_mask": mask}
        out = model.apply(xc, model.step_timesteps(t, mask), cond)
        denoised = ms.calculate_denoised(sigma, out, x)
    torch.testing.assert_close(raw, tensor(want["raw"]), atol=1e-5, rtol=0)
    torch.testing.assert_close(denoised, tensor(want["denoised"]), atol=1e-5, rtol=0)
    if mask is not None:  # the kept frame saw timestep 0: without the mask the step differs
        other = model.apply(xc, t, {"context": context})
        assert (ms.calculate_denoised(sigma, other, x) - denoised).abs().max() > 1e-3


def model_sampling(model):
    from nodes.sampling.model_sampling import model_sampling_from_config

    return model_sampling_from_config(model.sampling)


def test_inpaint_latent_gives_the_kept_frames_back_unnoised(demo_workspace) -> None:
    model = load(demo_workspace, I2V)
    ms = model_sampling(model)
    latent = torch.randn(1, 16, 2, 4, 4)
    sigma = torch.tensor([3.0])
    kept = model.inpaint_latent(ms, sigma, torch.randn_like(latent), latent)
    torch.testing.assert_close(ms.calculate_input(sigma, kept), latent)


def test_wrong_channels_are_refused_by_name(tmp_path) -> None:
    from nodes.models.cosmos_predict2 import infer_config

    sd = {"patch_embed.proj.weight": torch.zeros(192, 80), "transformer_blocks.0.attn1.norm_q.weight": torch.zeros(12)}
    with pytest.raises(ValueError, match="Cosmos Predict2's take 16 latent channels"):
        infer_config(sd)


# (seed, width, height, length, batch_size, start frames, end frames), as the recorder draws them
NODE_CASES = {
    "start": (5, 64, 48, 13, 2, 1, 0),
    "end": (6, 48, 32, 9, 1, 0, 1),
    "start_and_end_two_frames": (7, 32, 32, 17, 1, 2, 1),
    "none": (8, 32, 48, 5, 3, 0, 0),
}


@pytest.mark.parametrize("case", sorted(NODE_CASES))
def test_image_to_video_latent_equals_comfyuis(demo_workspace, case: str) -> None:
    import asyncio

    from nodes.library.cosmos import CosmosPredict2ImageToVideoLatent
    from nodes.loaders import make_ref

    torch.set_num_threads(1)
    seed, width, height, length, batch_size, starts, ends = NODE_CASES[case]
    gen = torch.Generator().manual_seed(seed)
    start = torch.rand([starts, 40, 56, 3], generator=gen) if starts else None
    end = torch.rand([ends, 40, 56, 3], generator=gen) if ends else None
    vae = make_ref("vae", "qwen_image", [demo_workspace.models_dir / "vae/wan_2.1_vae_tiny.safetensors"])
    node = CosmosPredict2ImageToVideoLatent()
    (latent,) = asyncio.run(node.execute(vae, width, height, length, batch_size, start_image=start, end_image=end))
    want = FIXTURE["node"][case]
    assert sorted(latent) == sorted(want)
    torch.testing.assert_close(latent["samples"], tensor(want["samples"]), atol=1e-5, rtol=0)
    if "noise_mask" in want:
        torch.testing.assert_close(latent["noise_mask"], tensor(want["noise_mask"]), atol=0, rtol=0)


def test_cosmos1_image_to_video_refuses_images_by_name() -> None:
    from nodes.library.cosmos import CosmosImageToVideoLatent

    (latent,) = CosmosImageToVideoLatent().execute(None, 64, 48, 17, 2)
    assert list(latent["samples"].shape) == [1, 16, 3, 6, 8] and not latent["samples"].any()
    with pytest.raises(NotImplementedError, match="Cosmos 1.0's video VAE"):
        CosmosImageToVideoLatent().execute(None, 64, 48, 17, 1, start_image=torch.rand(1, 48, 64, 3))


TEXT_ENCODER = "text_encoders/oldt5_xxl_tiny.safetensors"


def test_old_t5_is_cosmos_encoder_whatever_the_type(demo_workspace) -> None:
    from nodes.loaders import CLIPLoader
    from nodes.models.detect import probe

    assert probe(demo_workspace.models_dir / TEXT_ENCODER).arch == "t5_old"
    assert probe(demo_workspace.models_dir / "text_encoders/flux-tiny-t5.safetensors").arch == "t5"  # T5 1.1 stays
    for clip_type in ("cosmos", "stable_diffusion", "wan"):  # ComfyUI detects the file, not the type
        (clip,) = CLIPLoader().load_clip("oldt5_xxl_tiny.safetensors", clip_type)
        assert clip.arch == "cosmos_predict2"


@pytest.mark.parametrize("prompt", sorted(FIXTURE["text"]))
def test_text_encoder_equals_comfyuis(demo_workspace, prompt: str) -> None:
    from nodes.loaders import make_ref
    from nodes.models.loader import load_text_encoder
    from tests.recorded_tensors import at_recorded

    torch.set_num_threads(1)
    te = load_text_encoder(
        make_ref("text_encoder", "cosmos_predict2", [demo_workspace.models_dir / TEXT_ENCODER], clip_type="cosmos")
    )
    want = FIXTURE["text"][prompt]
    tokens = te.tokenize(prompt)
    assert [t for t, _ in tokens["t5xxl"][0]] == want["ids"]
    cond, pooled = te.encode(tokens)
    assert pooled is None
    ours, expected = at_recorded(cond, want["cond"]), tensor(want["cond"])
    assert not cond[0, len(prompt.split()) + 8 :].any()  # the padding's states are zeroed
    torch.testing.assert_close(ours, expected, atol=1e-5, rtol=0)
