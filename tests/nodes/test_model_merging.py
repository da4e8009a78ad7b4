"""Model merging and saving (nodes/library/model_merging*.py): merged refs resolve to the weights ComfyUI's
add_patches semantics give, computed here from the files of two demo SD1 checkpoints (the second built
with another seed); a merged model renders the same on an executor as in-process; saved files load back
through our loaders to the same weights and the same image."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

import nodes.models.demo as demo
from nodes.library import model_merging as mm
from nodes.library import model_merging_model_specific as mms
from nodes.loaders import CheckpointLoaderSimple, CLIPLoader, UNETLoader, VAELoader
from nodes.models.checkpoint_save import diffusion_model_state, text_encoder_sides, vae_state
from nodes.models.errors import ModelLoadError
from nodes.models.loader import text_encoder_weights
from nodes.models.safetensors_io import load_state_dict

UNET = "model.diffusion_model."
TE = "cond_stage_model.transformer.text_model."
SECOND = "sd1-tiny-b.safetensors"


@pytest.fixture(scope="module", autouse=True)
def demo_active(demo_workspace):
    """The merges load the demo checkpoints through the active workspace: make it the demo one (tests
    that ran before may have left their own active)."""
    from nodes import workspace as ws_module

    previous = ws_module._active
    ws_module.activate(demo_workspace)
    yield demo_workspace
    ws_module._active = previous


@pytest.fixture(scope="module")
def two_models(demo_active, tmp_path_factory):
    demo_workspace = demo_active
    """(refs of sd1-tiny, refs of a second SD1 checkpoint of the same shapes and another seed, raw files)."""
    target = demo_workspace.models_dir / "checkpoints" / SECOND
    if not target.exists():
        tmp = tmp_path_factory.mktemp("second_demo")
        seed = demo.SEED
        demo.SEED = 7
        try:
            demo.build_demo_models(tmp, include_flux=False)
        finally:
            demo.SEED = seed
        shutil.copy(tmp / "checkpoints" / "sd1-tiny.safetensors", target)
    a = CheckpointLoaderSimple().load_checkpoint("sd1-tiny.safetensors")
    b = CheckpointLoaderSimple().load_checkpoint(SECOND)
    files = (load_state_dict(a[0].sources[0]), load_state_dict(b[0].sources[0]))
    assert not torch.equal(files[0][UNET + "out.2.weight"], files[1][UNET + "out.2.weight"])
    return a, b, files


def _unet_expected(files, rule) -> dict[str, torch.Tensor]:
    """{checkpoint key: expected weight} for every UNet key, `rule(ldm name) -> (strength_model, patch)`."""
    fa, fb = files
    out = {}
    for k, w1 in fa.items():
        if k.startswith(UNET):
            sm, sp = rule(k[len(UNET) :])
            out[k] = w1.float() * sm + sp * fb[k].float()
    return out


def _assert_unet(ref, expected) -> None:
    _, sd, _ = diffusion_model_state(ref)
    assert set(sd) == set(expected)
    for k, v in expected.items():
        torch.testing.assert_close(sd[k].float(), v, rtol=0, atol=1e-6, msg=k)


@pytest.mark.parametrize("ratio", [0.0, 0.25, 1.0])
def test_simple_keeps_ratio_of_model1(two_models, ratio):
    (m1, _, _), (m2, _, _), files = two_models
    (merged,) = mm.ModelMergeSimple().merge(m1, m2, ratio)
    assert merged.key not in (m1.key, m2.key)
    _assert_unet(merged, _unet_expected(files, lambda k: (ratio, 1.0 - ratio)))


def test_subtract_and_add(two_models):
    (m1, _, _), (m2, _, _), files = two_models
    (diff,) = mm.ModelMergeSubtract().merge(m1, m2, 0.7)
    _assert_unet(diff, _unet_expected(files, lambda k: (0.7, -0.7)))
    (total,) = mm.ModelMergeAdd().merge(m2, diff)
    fa, fb = files
    # model2 + (model1 - model2) * 0.7, as nested patches resolve: the inner merge is computed first
    expected = {k: fb[k].float() + (fa[k].float() * 0.7 + -0.7 * fb[k].float()) for k in fa if k.startswith(UNET)}
    _assert_unet(total, expected)


def test_blocks_longest_prefix_wins_and_first_ratio_is_the_default(two_models):
    (m1, _, _), (m2, _, _), files = two_models
    (merged,) = mm.ModelMergeBlocks().merge(m1, m2, input=0.3, middle=0.6, out=0.9)

    def ratio(k: str) -> float:
        # "out" also prefixes output_blocks (ComfyUI's plain startswith); time_embed matches none: first ratio
        return 0.3 if k.startswith("input") else 0.6 if k.startswith("middle") else 0.9 if k.startswith("out") else 0.3

    _assert_unet(merged, _unet_expected(files, lambda k: (ratio(k), 1.0 - ratio(k))))


def test_model_specific_sd1_blocks(two_models):
    (m1, _, _), (m2, _, _), files = two_models
    node = mms.NODE_CLASS_MAPPINGS["ModelMergeSD1"]()
    ratios = {"time_embed.": 0.1, "input_blocks.1.": 0.2, "input_blocks.11.": 0.8, "middle_block.1.": 0.4, "out.": 0.5}
    (merged,) = node.merge(m1, m2, **ratios)

    def ratio(k: str) -> float:
        hits = [p for p in ratios if k.startswith(p)]
        return ratios[max(hits, key=len)] if hits else 1.0

    _assert_unet(merged, _unet_expected(files, lambda k: (ratio(k), 1.0 - ratio(k))))


def test_unknown_block_input_is_refused(two_models):
    (m1, _, _), (m2, _, _), _ = two_models
    with pytest.raises(ValueError, match="unknown block inputs"):
        mm.ModelMergeBlocks().merge(m1, m2, input=1.0, middle=1.0, out=1.0, nope=0.5)


@pytest.mark.parametrize(
    "node,args,rule",
    [
        (mm.CLIPMergeSimple, (0.35,), (0.35, 0.65)),
        (mm.CLIPMergeSubtract, (-1.5,), (-1.5, 1.5)),
        (mm.CLIPMergeAdd, (), (1.0, 1.0)),
    ],
)
def test_clip_merges(two_models, node, args, rule):
    (_, c1, _), (_, c2, _), (fa, fb) = two_models
    (merged,) = node().merge(c1, c2, *args)
    arch, combined = text_encoder_weights(merged)
    assert arch == "sd1"
    for key, value in combined.items():
        name = TE + key.split("/", 1)[1]
        torch.testing.assert_close(
            value.float(), fa[name].float() * rule[0] + rule[1] * fb[name].float(), rtol=0, atol=1e-6, msg=key
        )


def test_merge_and_lora_apply_in_the_order_added(two_models):
    from nodes.loaders import LoraLoader

    (m1, c1, _), (m2, _, _), _ = two_models
    lora_then_merge = mm.ModelMergeSimple().merge(
        LoraLoader().load_lora(m1, c1, "sd1-tiny-lora.safetensors", 1.0, 0.0)[0], m2, 0.5
    )[0]
    merge_then_lora = LoraLoader().load_lora(
        mm.ModelMergeSimple().merge(m1, m2, 0.5)[0], c1, "sd1-tiny-lora.safetensors", 1.0, 0.0
    )[0]
    assert lora_then_merge.key != merge_then_lora.key
    _, a, _ = diffusion_model_state(lora_then_merge)
    _, b, _ = diffusion_model_state(merge_then_lora)
    (_, plain, _) = diffusion_model_state(mm.ModelMergeSimple().merge(m1, m2, 0.5)[0])
    changed = [k for k in plain if not torch.equal(a[k].float(), plain[k].float())]
    assert changed
    # the LoRA delta is halved when the merge comes after it, whole when it comes last
    for k in changed[:4]:
        torch.testing.assert_close(
            b[k].float() - plain[k].float(), 2 * (a[k].float() - plain[k].float()), rtol=1e-4, atol=1e-5
        )


def test_merging_different_components_is_refused(two_models):
    (m1, c1, _), _, _ = two_models
    with pytest.raises(ValueError, match="cannot merge"):
        mm.ModelMergeSimple().merge(m1, c1, 0.5)


def test_unsupported_family_errors_at_load(two_models, demo_workspace):
    from nodes.loaders import make_ref, probe_arch
    from nodes.models.loader import load_diffusion_model

    flux = [
        p for p in (demo_workspace.models_dir / "diffusion_models").glob("*.safetensors") if probe_arch(p)[0] == "flux"
    ]
    if not flux:
        pytest.skip("no Flux demo model in this checkout")
    ref = make_ref("diffusion_model", "flux", [flux[0]])
    merged = mms.NODE_CLASS_MAPPINGS["ModelMergeFlux1"]().merge(ref, ref)[0]
    with pytest.raises(ModelLoadError, match="merged models are not supported"):
        load_diffusion_model(merged)


# ---- saving ----------------------------------------------------------------------------------------------


def _newest(folder: Path, pattern: str) -> Path:
    return max(folder.glob(pattern), key=lambda p: p.stat().st_mtime_ns)


def test_model_clip_vae_save_load_back(two_models, demo_workspace):
    (m1, c1, v1), (m2, c2, _), _ = two_models
    merged = mm.ModelMergeSimple().merge(m1, m2, 0.4)[0]
    clip = mm.CLIPMergeSimple().merge(c1, c2, 0.6)[0]
    out = demo_workspace.output_dir
    mm.ModelSave().save(merged, "diffusion_models/mergetest", prompt={"1": {}})
    mm.CLIPSave().save(clip, "clip/mergetest")
    mm.VAESave().save(v1, "vae/mergetest")
    unet_file = _newest(out / "diffusion_models", "mergetest_*_.safetensors")
    clip_file = _newest(out / "clip", "mergetest_clip_l_*_.safetensors")
    vae_file = _newest(out / "vae", "mergetest_*_.safetensors")
    for src, folder in ((unet_file, "diffusion_models"), (clip_file, "text_encoders"), (vae_file, "vae")):
        shutil.copy(src, demo_workspace.models_dir / folder / src.name)
    back_model = UNETLoader().load_unet(unet_file.name, "default")[0]
    assert _same(diffusion_model_state(back_model)[1], diffusion_model_state(merged)[1])
    back_clip = CLIPLoader().load_clip(clip_file.name, "stable_diffusion")[0]
    assert _same(text_encoder_sides(back_clip)[1]["l"], text_encoder_sides(clip)[1]["l"])
    back_vae = VAELoader().load_vae(vae_file.name)[0]
    assert _same(vae_state(back_vae), vae_state(v1))


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return set(a) == set(b) and all(torch.equal(a[k].float(), b[k].float()) for k in a)


def _merge_prompt(ckpt_nodes: dict) -> dict:
    """text_to_image at 64 px, 4 steps, with the model/clip/vae taken from `ckpt_nodes`' outputs."""
    prompt = json.loads((Path(__file__).resolve().parents[2] / "workflows_json" / "text_to_image.json").read_text())
    prompt["3"]["inputs"].update(steps=4, model=ckpt_nodes["model"])
    prompt["5"]["inputs"].update(width=64, height=64)
    prompt["6"]["inputs"]["clip"] = prompt["7"]["inputs"]["clip"] = ckpt_nodes["clip"]
    prompt["8"]["inputs"]["vae"] = ckpt_nodes["vae"]
    return prompt


def merged_prompt(prefix: str = "merged") -> dict:
    prompt = _merge_prompt({"model": ["20", 0], "clip": ["21", 0], "vae": ["4", 2]})
    prompt["10"] = {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": SECOND}}
    prompt["20"] = {
        "class_type": "ModelMergeBlocks",
        "inputs": {"model1": ["4", 0], "model2": ["10", 0], "input": 0.3, "middle": 0.7, "out": 0.5},
    }
    prompt["21"] = {"class_type": "CLIPMergeSimple", "inputs": {"clip1": ["4", 1], "clip2": ["10", 1], "ratio": 0.6}}
    prompt["9"]["inputs"]["filename_prefix"] = prefix
    return prompt


def test_checkpoint_save_round_trip_gives_the_same_image(two_models, demo_workspace, fixed_threads):
    from tests.e2e.test_samplers_on_executors import render_in_process

    (m1, c1, v1), (m2, c2, _), _ = two_models
    model = mm.ModelMergeBlocks().merge(m1, m2, input=0.3, middle=0.7, out=0.5)[0]
    clip = mm.CLIPMergeSimple().merge(c1, c2, 0.6)[0]
    path = Path(mm.save_checkpoint("checkpoints/roundtrip", model, clip, v1))
    header = json.loads(path.read_bytes()[8 : 8 + int.from_bytes(path.read_bytes()[:8], "little")])
    assert header["__metadata__"]["modelspec.predict_key"] == "epsilon"
    assert any(k.startswith("cond_stage_model.transformer.text_model.") for k in header)
    assert any(k.startswith("first_stage_model.") for k in header)
    shutil.copy(path, demo_workspace.models_dir / "checkpoints" / path.name)
    saved = _merge_prompt({"model": ["4", 0], "clip": ["4", 1], "vae": ["4", 2]})
    saved["4"]["inputs"]["ckpt_name"] = path.name
    images = render_in_process(demo_workspace, {"merged": merged_prompt(), "saved": saved})
    assert (images["merged"] == images["saved"]).all()
    plain = render_in_process(
        demo_workspace, {"plain": _merge_prompt({"model": ["4", 0], "clip": ["4", 1], "vae": ["4", 2]})}
    )["plain"]
    assert not (plain == images["merged"]).all()


def test_merged_model_renders_on_an_executor_as_in_process(two_models, demo_workspace, serve):
    from tests.e2e.test_samplers_on_executors import render_in_process, render_on_server

    local = render_in_process(demo_workspace, {"m": merged_prompt("merged_local")})["m"]
    base = serve("--executors", "1", "--executor-threads", "1")
    remote = render_on_server(base, {"m": merged_prompt("merged_remote")})["m"]
    assert (remote == local).all()


def test_sdxl_merge_saves_a_checkpoint_that_loads_back(demo_workspace):
    m, c, v = CheckpointLoaderSimple().load_checkpoint("sdxl-tiny.safetensors")
    ratios = {p: 0.5 for p in mms.FAMILIES["ModelMergeSDXL"][0]}
    model = mms.NODE_CLASS_MAPPINGS["ModelMergeSDXL"]().merge(m, mm.ModelMergeSubtract().merge(m, m, 0.5)[0], **ratios)[
        0
    ]
    clip = mm.CLIPMergeAdd().merge(c, c)[0]
    path = Path(mm.save_checkpoint("checkpoints/xl_roundtrip", model, clip, v))
    shutil.copy(path, demo_workspace.models_dir / "checkpoints" / path.name)
    bm, bc, bv = CheckpointLoaderSimple().load_checkpoint(path.name)
    assert (bm.arch, bc.arch) == ("sdxl", "sdxl")
    assert _same(diffusion_model_state(bm)[1], diffusion_model_state(model)[1])
    sides, back = text_encoder_sides(clip)[1], text_encoder_sides(bc)[1]
    assert set(sides) == {"l", "g"} and all(_same(back[s], sides[s]) for s in sides)
    assert _same(vae_state(bv), vae_state(v))
