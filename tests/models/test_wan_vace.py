"""Wan 2.1 VACE checked against ComfyUI on wan-tiny's VACE file.

tests/models/fixtures/comfyui_wan_vace.json.xz was recorded by scripts/record_comfyui_wan_vace.py (upstream ComfyUI
0.10.0): WanVaceToVideo's conditioning with and without its optional inputs and, for each, one denoising
evaluation through ComfyUI's VACE model (WAN21_Vace.extra_conds' vace_context, apply_model), and one without
any VACE conditioning (the model's default context)."""

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
from nodes.models.wan import infer_config, to_wan_layout
from nodes.models.wan_demo import FILES, build_demo_wan, tiny_wan_state_dicts
from nodes.sampling.model_sampling import model_sampling_from_config
from tests.models.test_wan import tensor
from tests.node_calls import active_workspace
from tests.recorded_tensors import load_json

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_wan_vace.json.xz")
ATOL, RTOL = 2e-5, 1e-4


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """An active workspace holding wan-tiny, whose ModelFns run in-process."""
    yield from active_workspace(tmp_path_factory.mktemp("wan-vace-ws"), build_demo_wan)


@pytest.fixture(scope="module")
def model(workspace):
    return loader.load_diffusion_model(make_ref("diffusion_model", "wan21", [workspace.models_dir / FILES["vace"]]))


def test_vace_files_are_the_recorded_ones_and_detected(workspace) -> None:
    for part, rec in FIXTURE["files"].items():
        assert rec["path"] == FILES[part]
        assert hashlib.sha256((workspace.models_dir / FILES[part]).read_bytes()).hexdigest() == rec["sha256"], (
            f"{FILES[part]} changed: re-record tests/models/fixtures/comfyui_wan_vace.json.xz"
        )
    sd = tiny_wan_state_dicts()["vace"]
    # ComfyUI's model_detection: vace_in_dim from vace_patch_embedding.weight, vace_layers by counting vace_blocks
    assert sd["vace_patch_embedding.weight"].shape[1] == 96 and "vace_blocks.1.after_proj.weight" in sd
    assert "vace_blocks.0.before_proj.weight" in sd and "vace_blocks.1.before_proj.weight" not in sd
    config = infer_config(to_wan_layout(sd))
    assert (config["num_layers"], config["vace_layers"], config["vace_in_channels"]) == (4, [0, 2], 96)
    info = probe(workspace.models_dir / FILES["vace"])
    assert (info.arch, info.kind) == ("wan21", "diffusion_model")
    # the same file under ComfyUI's checkpoint prefix is the same model
    prefixed = {"model.diffusion_model." + k: v for k, v in sd.items()}
    assert infer_config(to_wan_layout(prefixed)) == config


def test_uneven_vace_blocks_are_refused() -> None:
    sd = dict(to_wan_layout(tiny_wan_state_dicts()["vace"]))
    extra = {k.replace("vace_blocks.1.", "vace_blocks.2."): v for k, v in sd.items() if k.startswith("vace_blocks.1.")}
    with pytest.raises(ValueError, match="3 VACE blocks"):
        infer_config({**sd, **extra})


def _node(ws, case: str):
    from nodes.library.wan_vace import WanVaceToVideo

    rec = FIXTURE[case]
    vae = make_ref("vae", "qwen_image", [ws.models_dir / FILES["vae"]])
    cond = [[tensor(FIXTURE["context"]), {}]]
    given = {k: tensor(FIXTURE["inputs"][k]) for k in rec["inputs"]}
    return asyncio.run(WanVaceToVideo().execute(cond, cond, vae, 48, 32, 9, 1, rec["strength"], **given))


@pytest.mark.parametrize("case", ["all_inputs", "no_inputs"])
def test_wan_vace_to_video_and_one_step_equal_comfyuis(workspace, model, case: str) -> None:
    """The node's conditioning; then, as the sampler hands it to the model (nodes.conditioning.flatten), the
    model's vace context and one evaluation to the denoised prediction."""
    rec = FIXTURE[case]
    pos, neg, latent, trim = _node(workspace, case)
    assert list(latent["samples"].shape) == rec["latent_shape"] and not latent["samples"].any()
    assert trim == rec["trim_latent"]
    for opts in (pos[0][1], neg[0][1]):
        assert opts["vace_strength"] == rec["vace_strength"]
        for key in ("vace_frames", "vace_mask"):
            (got,), (want,) = opts[key], rec[key]
            torch.testing.assert_close(got, tensor(want), atol=ATOL, rtol=RTOL, msg=f"{case} {key}")
    tensors, (entry,) = flatten("positive", pos, lambda p: 1.0 - p)
    key, step = entry["key"], rec["step"]
    x, sigma = tensor(step["x"]), torch.tensor([step["sigma"]])
    context = model.vace_context([tensors[f"{key}.vace.0.frames"]], [tensors[f"{key}.vace.0.mask"]], x)
    torch.testing.assert_close(context, tensor(step["vace_context"]), atol=ATOL, rtol=RTOL)
    ms = model_sampling_from_config(sampling_config("wan21"))
    out = model.apply(
        ms.calculate_input(sigma, x),
        ms.timestep(sigma),
        {"context": tensor(FIXTURE["context"]), "vace_context": context, "vace_strength": entry["vace_strength"]},
    )
    torch.testing.assert_close(ms.calculate_denoised(sigma, out, x), tensor(step["denoised"]), atol=ATOL, rtol=RTOL)


def test_a_vace_model_without_vace_conditioning_equals_comfyuis(model) -> None:
    step = FIXTURE["default_step"]
    x, sigma = tensor(step["x"]), torch.tensor([step["sigma"]])
    torch.testing.assert_close(model.vace_context(None, None, x), tensor(step["vace_context"]))
    ms = model_sampling_from_config(sampling_config("wan21"))
    out = model.apply(ms.calculate_input(sigma, x), ms.timestep(sigma), {"context": tensor(FIXTURE["context"])})
    torch.testing.assert_close(ms.calculate_denoised(sigma, out, x), tensor(step["denoised"]), atol=ATOL, rtol=RTOL)


def test_chained_wan_vace_to_video_and_one_step_equal_comfyuis(workspace, model) -> None:
    """A second WanVaceToVideo on the first one's conditioning: two contexts, each with its strength, their hints
    added after every VACE layer in ComfyUI's order (the first through diffusers' forward, the second by the
    model's hooks); then the same model with one context again, the hooks idle."""
    from nodes.library.wan_vace import WanVaceToVideo

    rec = FIXTURE["chained"]
    first, _, _, _ = _node(workspace, "all_inputs")
    vae = make_ref("vae", "qwen_image", [workspace.models_dir / FILES["vae"]])
    ref = tensor(FIXTURE["inputs"]["reference_image"]).flip(0)
    pos, neg, _, _ = asyncio.run(WanVaceToVideo().execute(first, first, vae, 48, 32, 9, 1, 1.3, reference_image=ref))
    assert pos[0][1]["vace_strength"] == neg[0][1]["vace_strength"] == rec["vace_strength"] == [0.7, 1.3]
    tensors, (entry,) = flatten("positive", pos, lambda p: 1.0 - p)
    key, step = entry["key"], rec["step"]
    frames = [tensors[f"{key}.vace.{i}.frames"] for i in range(2)]
    masks = [tensors[f"{key}.vace.{i}.mask"] for i in range(2)]
    x, sigma = tensor(step["x"]), torch.tensor([step["sigma"]])
    context = model.vace_context(frames, masks, x)
    torch.testing.assert_close(context, tensor(step["vace_context"]), atol=ATOL, rtol=RTOL)
    ms = model_sampling_from_config(sampling_config("wan21"))
    cond = {"context": tensor(FIXTURE["context"]), "vace_context": context, "vace_strength": entry["vace_strength"]}
    out = model.apply(ms.calculate_input(sigma, x), ms.timestep(sigma), cond)
    torch.testing.assert_close(ms.calculate_denoised(sigma, out, x), tensor(step["denoised"]), atol=ATOL, rtol=RTOL)
    only_first = model.apply(
        ms.calculate_input(sigma, x),
        ms.timestep(sigma),
        {**cond, "vace_context": context[:, :1], "vace_strength": [0.7]},
    )
    assert not torch.allclose(only_first, out, atol=1e-3), "the second context changed nothing"
    with pytest.raises(ValueError, match="vace_strength: 1 strengths for 2 VACE contexts"):
        model.apply(x, torch.tensor([500.0]), {**cond, "vace_strength": [0.7]})


def test_other_wan_models_ignore_vace_conditioning(workspace) -> None:
    """As ComfyUI's other Wan models: no vace context, the model's output unchanged."""
    plain = loader.load_diffusion_model(make_ref("diffusion_model", "wan21", [workspace.models_dir / FILES["t2v"]]))
    assert plain.vace_context(None, None, torch.zeros(1, 16, 2, 4, 4)) is None
