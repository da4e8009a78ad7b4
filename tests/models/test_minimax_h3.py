"""MiniMax H3 transformer: the published file layout detected and loaded onto diffusers' model, and one
evaluation with ComfyUI's packing checked against diffusers' own MiniMax H3 pipeline blocks (its packed-layout
and row-timestep builders and its two schedulers) driving the same weights. No ComfyUI that can run here has
MiniMax H3; ComfyUI's semantics (comfy/ldm/minimax/model.py, newest source) are what `apply` follows."""

from __future__ import annotations

import pytest
import torch
from diffusers import MiniMaxH3Scheduler, MiniMaxH3Transformer3DModel
from diffusers.modular_pipelines.minimax_h3.before_denoise import (
    MiniMaxH3PrepareLayoutStep,
    MiniMaxH3SetTimestepsStep,
    patchify_video_latents,
)

from nodes.models.errors import ModelLoadError
from nodes.models.minimax_h3 import (
    Keyframe,
    apply,
    diffusers_to_published,
    infer_config,
    is_minimax_h3,
    keyframe_rows,
    load_transformer,
    t2va_layout,
)

CONFIG = {
    "num_attention_heads": 2,
    "attention_head_dim": 32,
    "hidden_size": 64,
    "num_layers": 2,
    "num_refiner_layers": 1,
    "ffn_dim": 96,
    "in_channels": 24,
    "audio_in_channels": 32,
    "patch_size": (1, 2, 2),
    "text_dim": 40,
    "freq_dim": 32,
    "time_embed_hidden_dim": 48,
    "time_embed_dim": 24,
    "rope_freq_dim": 4,
}


@pytest.fixture(scope="module")
def reference() -> MiniMaxH3Transformer3DModel:
    torch.manual_seed(0)
    model = MiniMaxH3Transformer3DModel(**CONFIG).eval()
    with torch.no_grad():  # diffusers zero-inits nothing here, but make every tensor matter
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return model


@pytest.fixture(scope="module")
def published(reference) -> dict[str, torch.Tensor]:
    return diffusers_to_published(reference.state_dict(), reference.rope.inv_freq)


def test_published_layout_is_detected_and_sized(published):
    assert is_minimax_h3(published.keys())
    assert is_minimax_h3(f"model.diffusion_model.{k}" for k in published)
    assert not is_minimax_h3(["head.modulation", "blocks.0.self_attn.q.weight"])  # a Wan file
    config = infer_config(published)
    assert {k: config[k] for k in CONFIG} == {**CONFIG, "patch_size": (1, 2, 2)}
    assert "blocks.0.attn.qkv_proj.weight" in published and "final_layer.video_out.weight" in published


def test_loaded_weights_equal_the_reference(reference, published):
    model = load_transformer({f"model.diffusion_model.{k}": v for k, v in published.items()})
    ours, theirs = model.state_dict(), reference.state_dict()
    assert ours.keys() == theirs.keys()
    for key in theirs:
        assert torch.equal(ours[key], theirs[key]), key
    assert torch.equal(model.rope.inv_freq, reference.rope.inv_freq)


def test_bad_files_are_refused_by_name(published):
    with pytest.raises(ModelLoadError, match="does not match its inferred shape"):  # curve form and embedder both
        load_transformer({**published, "adaln_t_table": torch.zeros(8, 24)})
    broken = {k: v for k, v in published.items() if k != "condition_proj.weight"}
    with pytest.raises(ModelLoadError, match="condition_proj.weight"):
        load_transformer(broken)
    with pytest.raises(ModelLoadError, match="not a MiniMax H3"):
        load_transformer({"head.modulation": torch.zeros(1)})


def _diffusers_layout(text_len, latent_t, lat_h, lat_w, audio_t, anchors=()):
    return MiniMaxH3PrepareLayoutStep.build_packed_sequence(
        torch.ones(text_len, dtype=torch.long), latent_t, lat_h, lat_w, audio_t, (1, 2, 2), 2, 2, 0, anchors
    )


@pytest.mark.parametrize("shape", [(5, 3, 6, 4, 11), (7, 2, 4, 8, 9)])
def test_layout_equals_diffusers(shape):
    ours = t2va_layout(*shape)
    pos, tags, video_idx, audio_idx, text_idx, _, _ = _diffusers_layout(*shape)
    torch.testing.assert_close(ours.position_ids, pos, rtol=0, atol=1e-12)
    assert torch.equal(ours.token_tags, tags)
    for a, b in ((ours.video_indices, video_idx), (ours.audio_indices, audio_idx), (ours.text_indices, text_idx)):
        assert torch.equal(a, b)


def test_one_step_equals_diffusers_pipeline(reference, published):
    torch.set_num_threads(1)
    model = load_transformer(published)
    g = torch.Generator().manual_seed(1)
    text_len, latent_t, lat_h, lat_w, audio_t = 6, 3, 4, 6, 10
    video = torch.randn(1, 24, latent_t, lat_h, lat_w, generator=g)
    audio = torch.randn(1, 32, 2, audio_t, generator=g)
    context = torch.randn(1, text_len, CONFIG["text_dim"], generator=g)

    # diffusers' pipeline: two schedulers (video shift 12, audio shift 3) on one base grid, its layout and rows
    video_sched, audio_sched = MiniMaxH3Scheduler(shift=12.0), MiniMaxH3Scheduler(shift=3.0)
    video_sched.set_timesteps(6)
    audio_sched.set_timesteps(6)
    pos, tags, video_idx, audio_idx, text_idx, n_cv, n_ca = _diffusers_layout(text_len, latent_t, lat_h, lat_w, audio_t)
    audio_rows = audio[0].permute(1, 2, 0).reshape(2 * audio_t, 32)
    checked = 0
    for step in range(len(video_sched.timesteps)):
        t_v, t_a = float(video_sched.timesteps[step]), float(audio_sched.timesteps[step])
        uniq, idx = MiniMaxH3SetTimestepsStep.build_row_timesteps(
            video_idx, audio_idx, n_cv, n_ca, text_len, t_v, t_a, t_v, 1.0
        )
        with torch.no_grad():
            v_ref, a_ref = reference(
                hidden_states=patchify_video_latents(video, (1, 2, 2))[None],
                audio_hidden_states=audio_rows[None],
                encoder_hidden_states=context,
                timestep=uniq,
                timestep_indices=idx,
                token_tags=tags,
                position_ids=pos,
                video_indices=video_idx,
                audio_indices=audio_idx,
                text_indices=text_idx,
                return_dict=False,
            )
        v_ours, a_ours = apply(model, video, audio, context, float(video_sched.sigmas[step]))
        # ComfyUI returns the negated velocity, shaped as the latents
        ref_video = -v_ref[0].reshape(latent_t, lat_h // 2, lat_w // 2, 24, 2, 2).permute(3, 0, 1, 4, 2, 5)
        torch.testing.assert_close(v_ours, ref_video.reshape(1, 24, latent_t, lat_h, lat_w), rtol=0, atol=1e-5)
        ref_audio = -a_ref[0].reshape(2, audio_t, 32).permute(2, 0, 1)[None]
        torch.testing.assert_close(a_ours, ref_audio, rtol=0, atol=1e-5)
        checked += 1
    assert checked == 5


def test_bad_latents_are_refused(published):
    model = load_transformer(published)
    with pytest.raises(ValueError, match="even"):
        apply(model, torch.zeros(1, 24, 1, 3, 4), torch.zeros(1, 32, 2, 4), torch.zeros(1, 2, 40), 0.5)
    with pytest.raises(ValueError, match=r"\[1, C, 2, T\]"):
        apply(model, torch.zeros(1, 24, 1, 4, 4), torch.zeros(1, 32, 4), torch.zeros(1, 2, 40), 0.5)


def _curve_file(reference, published, rows: int) -> dict[str, torch.Tensor]:
    """A curve-form file made from the full one: the activated time embedding tabulated on an even grid of t."""
    t = torch.linspace(0.0, 1.0, rows)
    with torch.no_grad():
        table = torch.nn.functional.silu(reference.time_embedder(reference.time_proj(t)))
    curve = {k: v for k, v in published.items() if not k.startswith("time_embedder.")}
    curve["adaln_t_table"] = table
    return curve


def test_curve_form_equals_the_full_model_on_its_grid(reference, published):
    torch.set_num_threads(1)
    # base grid point b = 1/3: video sigma 12b/(1+11b) = 6/7 (t = 1/7), audio sigma 3b/(1+2b) = 3/5 (t = 2/5);
    # both t lie on a 36-row grid (k/35), where the table's rows are the full model's activated embedding
    full, curve = load_transformer(published), load_transformer(_curve_file(reference, published, 36))
    assert not any(k.startswith("time_embedder.linear") for k in curve.state_dict())
    g = torch.Generator().manual_seed(2)
    video, audio = torch.randn(1, 24, 2, 4, 4, generator=g), torch.randn(1, 32, 2, 6, generator=g)
    context = torch.randn(1, 5, CONFIG["text_dim"], generator=g)
    for ours, theirs in zip(apply(curve, video, audio, context, 6 / 7), apply(full, video, audio, context, 6 / 7)):
        torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-5)
    # between rows the curve is interpolated, so it departs from the exact embedding (two rows: t = 0 and 1)
    coarse = load_transformer(_curve_file(reference, published, 2))
    v_curve, _ = apply(coarse, video, audio, context, 0.5)
    v_full, _ = apply(full, video, audio, context, 0.5)
    assert not torch.allclose(v_curve, v_full, atol=1e-4)


def test_first_last_frame_layout_and_step_equal_diffusers(reference, published):
    """fl2va: a first and a last keyframe (pixel frames 0 and 21 of a 22-frame video, 7 latent frames) as
    diffusers anchors them ("first", "last"), held at t = max(t_video, 0.999); their rows noised by ComfyUI's
    recipe (a CPU generator at the seed per condition) and handed to diffusers' transformer as its rows."""
    torch.set_num_threads(1)
    text_len, latent_t, lat_h, lat_w, audio_t = 4, 7, 4, 4, 12
    ours = t2va_layout(text_len, latent_t, lat_h, lat_w, audio_t, keyframe_frames=(0, 21))
    pos, tags, video_idx, audio_idx, text_idx, n_cv, n_ca = _diffusers_layout(
        text_len, latent_t, lat_h, lat_w, audio_t, ("first", "last")
    )
    torch.testing.assert_close(ours.position_ids, pos, rtol=0, atol=1e-12)
    assert torch.equal(ours.token_tags, tags) and torch.equal(ours.video_indices, video_idx)
    assert torch.equal(ours.audio_indices, audio_idx) and n_cv == 2 * (lat_h // 2) * (lat_w // 2)

    model = load_transformer(published)
    g = torch.Generator().manual_seed(4)
    video = torch.randn(1, 24, latent_t, lat_h, lat_w, generator=g)
    audio = torch.randn(1, 32, 2, audio_t, generator=g)
    context = torch.randn(1, text_len, CONFIG["text_dim"], generator=g)
    keyframes = [Keyframe(torch.randn(1, 24, 1, lat_h, lat_w, generator=g), i) for i in (0, 21)]
    cond = keyframe_rows(keyframes, 0.999, seed=7)
    video_sched, audio_sched = MiniMaxH3Scheduler(shift=12.0), MiniMaxH3Scheduler(shift=3.0)
    video_sched.set_timesteps(6)
    audio_sched.set_timesteps(6)
    for step in (0, 3):
        sigma = float(video_sched.sigmas[step])
        t_v, t_a = float(video_sched.timesteps[step]), float(audio_sched.timesteps[step])
        uniq, idx = MiniMaxH3SetTimestepsStep.build_row_timesteps(
            video_idx, audio_idx, n_cv, n_ca, text_len, t_v, t_a, max(t_v, 0.999), 1.0
        )
        rows = torch.cat([cond, patchify_video_latents(video, (1, 2, 2))])
        with torch.no_grad():
            v_ref, a_ref = reference(
                hidden_states=rows[None],
                audio_hidden_states=audio[0].permute(1, 2, 0).reshape(2 * audio_t, 32)[None],
                encoder_hidden_states=context,
                timestep=uniq,
                timestep_indices=idx,
                token_tags=tags,
                position_ids=pos,
                video_indices=video_idx,
                audio_indices=audio_idx,
                text_indices=text_idx,
                return_dict=False,
            )
        v_ours, a_ours = apply(model, video, audio, context, sigma, keyframes=keyframes, seed=7)
        ref_video = -v_ref[0, n_cv:].reshape(latent_t, lat_h // 2, lat_w // 2, 24, 2, 2).permute(3, 0, 1, 4, 2, 5)
        torch.testing.assert_close(v_ours, ref_video.reshape(1, 24, latent_t, lat_h, lat_w), rtol=0, atol=1e-5)
        torch.testing.assert_close(a_ours, -a_ref[0].reshape(2, audio_t, 32).permute(2, 0, 1)[None], rtol=0, atol=1e-5)
    v_plain, _ = apply(model, video, audio, context, 0.5)
    assert not torch.allclose(v_plain, v_ours, atol=1e-4)  # the keyframes do reach the target
    with pytest.raises(ValueError, match="one frame of the video's size"):
        apply(model, video, audio, context, 0.5, keyframes=[Keyframe(torch.zeros(1, 24, 2, lat_h, lat_w), 0)])


def test_keyframe_noise_is_comfyuis_recipe():
    latent = torch.randn(1, 24, 1, 4, 4, generator=torch.Generator().manual_seed(5))
    rows = keyframe_rows([Keyframe(latent, 0), Keyframe(latent, 21)], 0.9, seed=3)
    noise = torch.randn(4, 96, generator=torch.Generator("cpu").manual_seed(3))
    clean = latent.reshape(24, 1, 2, 2, 2, 2).permute(1, 2, 4, 0, 3, 5).reshape(4, 96)
    torch.testing.assert_close(rows, torch.cat([0.9 * clean + 0.1 * noise] * 2), rtol=0, atol=1e-6)
    assert torch.equal(keyframe_rows([Keyframe(latent, 0)], 1.0), clean)


def test_reference_image_layout_and_step_equal_diffusers(reference, published):
    """ref2va: two reference images of their own sizes (latent 4x6 and 6x2, the target 4x4) packed between the
    prompt and the target as diffusers' build_ref2va_packed_sequence lays them out (one rotary time unit each,
    the target's clock after them), held at t = max(t_video, 0.999), their rows noised by ComfyUI's recipe."""
    from types import SimpleNamespace

    from diffusers.modular_pipelines.minimax_h3.before_denoise import MiniMaxH3Ref2VAPrepareLayoutStep

    torch.set_num_threads(1)
    text_len, latent_t, lat_h, lat_w, audio_t = 5, 2, 4, 4, 9
    g = torch.Generator().manual_seed(11)
    refs = [torch.randn(1, 24, 1, 4, 6, generator=g), torch.randn(1, 24, 1, 6, 2, generator=g)]
    text_tags = torch.tensor([1, 0, 0, 0, 1])
    ours = t2va_layout(text_len, latent_t, lat_h, lat_w, audio_t, text_tags, ref_grids=((4, 6), (6, 2)))
    pos, tags, video_idx, audio_idx, text_idx, n_cv, n_ca = (
        MiniMaxH3Ref2VAPrepareLayoutStep.build_ref2va_packed_sequence(
            text_tags,
            [SimpleNamespace(kind="image")] * 2,
            refs,
            [],
            latent_t,
            lat_h,
            lat_w,
            audio_t,
            (1, 2, 2),
            2,
            2,
            0,
        )
    )
    torch.testing.assert_close(ours.position_ids, pos, rtol=0, atol=1e-12)
    assert torch.equal(ours.token_tags, tags) and torch.equal(ours.video_indices, video_idx)
    assert torch.equal(ours.audio_indices, audio_idx) and torch.equal(ours.text_indices, text_idx)
    assert n_cv == 6 + 3 and n_ca == 0

    model = load_transformer(published)
    video = torch.randn(1, 24, latent_t, lat_h, lat_w, generator=g)
    audio = torch.randn(1, 32, 2, audio_t, generator=g)
    context = torch.randn(1, text_len, CONFIG["text_dim"], generator=g)
    noise = [torch.randn(n, 96, generator=torch.Generator("cpu").manual_seed(7)) for n in (6, 3)]
    cond = torch.cat([0.999 * patchify_video_latents(r, (1, 2, 2)) + 0.001 * n for r, n in zip(refs, noise)])
    video_sched, audio_sched = MiniMaxH3Scheduler(shift=12.0), MiniMaxH3Scheduler(shift=3.0)
    video_sched.set_timesteps(6)
    audio_sched.set_timesteps(6)
    for step in (0, 4):
        sigma = float(video_sched.sigmas[step])
        t_v, t_a = float(video_sched.timesteps[step]), float(audio_sched.timesteps[step])
        uniq, idx = MiniMaxH3SetTimestepsStep.build_row_timesteps(
            video_idx, audio_idx, n_cv, n_ca, text_len, t_v, t_a, max(t_v, 0.999), 1.0
        )
        with torch.no_grad():
            v_ref, a_ref = reference(
                hidden_states=torch.cat([cond, patchify_video_latents(video, (1, 2, 2))])[None],
                audio_hidden_states=audio[0].permute(1, 2, 0).reshape(2 * audio_t, 32)[None],
                encoder_hidden_states=context,
                timestep=uniq,
                timestep_indices=idx,
                token_tags=tags,
                position_ids=pos,
                video_indices=video_idx,
                audio_indices=audio_idx,
                text_indices=text_idx,
                return_dict=False,
            )
        v_ours, a_ours = apply(model, video, audio, context, sigma, text_tags=text_tags, refs=refs, seed=7)
        ref_video = -v_ref[0, n_cv:].reshape(latent_t, lat_h // 2, lat_w // 2, 24, 2, 2).permute(3, 0, 1, 4, 2, 5)
        torch.testing.assert_close(v_ours, ref_video.reshape(1, 24, latent_t, lat_h, lat_w), rtol=0, atol=1e-5)
        torch.testing.assert_close(a_ours, -a_ref[0].reshape(2, audio_t, 32).permute(2, 0, 1)[None], rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match="reference image latent must be one frame"):
        apply(model, video, audio, context, 0.5, refs=[torch.zeros(1, 24, 2, 4, 4)])
