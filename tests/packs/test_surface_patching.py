"""comfy.patcher_extension, comfy.model_patcher helpers, comfy.hooks, comfy.controlnet, comfy.samplers' cond
batching, nodes_stable3d.camera_embeddings, chainner_models.model_loading and the small module names packs
read (comfy.sample.np, comfy.cli_args.parser, get_autocast_device, comfy_api.torch_helpers), checked
against ComfyUI's own numbers (tests/packs/fixtures/comfyui_surface_patching.json, recorded by
scripts/record_comfyui_surface_patching.py)."""

from __future__ import annotations

import pytest
import torch

from comfy_bridge.compat.comfy import cli_args, controlnet, hooks, model_management, model_patcher, sample, samplers
from comfy_bridge.compat.comfy import patcher_extension as pe
from comfy_bridge.compat.comfy_extras._stable3d import camera_embeddings
from comfy_bridge.compat.comfy_extras.chainner_models import model_loading
from comfy_bridge.packs.origin import UnsupportedFeature
from nodes.modelfns import hooks as core_hooks

from .recorded import load

FIXTURE = load("comfyui_surface_patching.json")


# ---- patcher_extension / model_patcher ------------------------------------------------------------------


def test_wrappers_and_callbacks_registered_by_key_are_read_back():
    opts: dict = {}
    w1, w2, cb = (lambda e, *a: e(*a)), (lambda e, *a: e(*a)), (lambda *a: None)
    pe.add_wrapper_with_key(pe.WrappersMP.APPLY_MODEL, "k1", w1, opts)
    pe.add_wrapper(pe.WrappersMP.APPLY_MODEL, w2, opts)
    pe.add_callback_with_key(pe.CallbacksMP.ON_PRE_RUN, "k1", cb, opts)
    assert opts == {"wrappers": {"apply_model": {"k1": [w1], None: [w2]}}, "callbacks": {"on_pre_run": {"k1": [cb]}}}
    assert pe.get_wrappers_with_key("apply_model", "k1", opts) == [w1]
    assert pe.get_all_wrappers("apply_model", opts) == [w1, w2]
    assert pe.get_all_callbacks("on_pre_run", opts) == [cb]
    model_options: dict = {}
    pe.add_wrapper_with_key("outer_sample", "ad", w1, model_options, is_model_options=True)
    assert pe.get_all_wrappers("outer_sample", model_options, is_model_options=True) == [w1]
    assert model_options["transformer_options"]["wrappers"]["outer_sample"]["ad"] == [w1]
    assert pe.get_all_wrappers("outer_sample", {}, is_model_options=True) == []


def test_wrapper_executor_runs_wrappers_outside_in_then_the_original():
    calls = []

    def original(x, scale=1):
        calls.append("original")
        return x * scale

    def outer(executor, x, scale=1):
        calls.append(("outer", executor.class_obj))
        return executor(x + 1, scale=scale) * 10

    def inner(executor, x, scale=1):
        calls.append("inner")
        return executor(x, scale=scale + 1)

    out = pe.WrapperExecutor.new_class_executor(original, "obj", [outer, inner]).execute(2, scale=1)
    assert out == (2 + 1) * 2 * 10
    assert calls == [("outer", "obj"), "inner", "original"]
    assert pe.WrapperExecutor.new_executor(original, []).execute(3) == 3


def test_nested_dicts_copy_and_merge_as_comfyui():
    case = FIXTURE["merge_nested_dicts"]
    d1 = case["d1"]
    assert pe.merge_nested_dicts(d1, case["d2"]) == case["out"]
    assert d1 == case["d1"]  # copied first
    copy = pe.copy_nested_dicts(d1)
    copy["n"]["x"].append(9)
    assert d1["n"]["x"] == [1]


def test_model_patcher_module_exports_injection_and_options_helpers():
    assert model_patcher.PatcherInjection is pe.PatcherInjection
    inj = model_patcher.PatcherInjection(inject=len, eject=abs)
    assert (inj.inject, inj.eject) == (len, abs)
    shared = {"patches_replace": {"attn1": {("input", 1): "old"}}}
    opts = {"transformer_options": shared}
    out = model_patcher.set_model_options_patch_replace(opts, "new", "attn1", "middle", 0, 2)
    assert out["transformer_options"]["patches_replace"]["attn1"] == {("input", 1): "old", ("middle", 0, 2): "new"}
    assert shared["patches_replace"]["attn1"] == {("input", 1): "old"}  # the clone's dicts are untouched
    clone = model_patcher.create_model_options_clone(out)
    clone["transformer_options"]["patches_replace"]["attn1"]["x"] = 1
    assert "x" not in out["transformer_options"]["patches_replace"]["attn1"]


# ---- hooks ---------------------------------------------------------------------------------------------


def test_hook_keyframe_groups_built_by_pack_code_are_core_hook_keyframes():
    group = hooks.HookKeyframeGroup()
    group.add(hooks.HookKeyframe(strength=torch.tensor(0.5), start_percent=torch.tensor(0.25), guarantee_steps=0))
    group.add(hooks.HookKeyframe(strength=1.0))
    assert isinstance(group, core_hooks.HookKeyframes)
    assert [(k.strength, k.start_percent, k.guarantee_steps) for k in group.keyframes] == [
        (1.0, 0.0, 1),
        (0.5, 0.25, 0),
    ]
    clone = group.clone()
    clone.add(hooks.HookKeyframe(0.1, 0.9))
    assert len(group.keyframes) == 2 and len(clone.keyframes) == 3
    assert hooks.HookGroup is core_hooks.HookGroup


@pytest.mark.parametrize("case", FIXTURE["interpolation"], ids=lambda c: c["method"])
def test_interpolation_weights_match_comfyui(case):
    out = hooks.InterpolationMethod.get_weights(
        case["from"], case["to"], case["length"], case["method"], reverse=case["reverse"]
    )
    torch.testing.assert_close(out, torch.tensor(case["out"]), rtol=0, atol=1e-6)


def test_cond_props_helpers_write_the_core_hook_node_keys():
    cond = [[torch.zeros(1, 2, 3), {"x": 1}]]
    mask = torch.ones(4, 4)
    group = core_hooks.HookGroup()
    (out,) = hooks.set_conds_props([cond], 0.7, "mask bounds", mask=mask, hooks=group, timesteps_range=(0.2, 0.8))
    opts = out[0][1]
    assert opts["x"] == 1 and opts["hooks"] is group and opts["mask"].shape == (1, 4, 4)
    assert (opts["set_area_to_bounds"], opts["mask_strength"], opts["start_percent"], opts["end_percent"]) == (
        True,
        0.7,
        0.2,
        0.8,
    )
    (combined,) = hooks.set_conds_props_and_combine([cond], [cond])
    assert len(combined) == 2 and combined[1][1] == {"x": 1}
    (default,) = hooks.set_default_conds_and_combine([cond], [cond])
    assert default[1][1] == {"x": 1, "default": True}
    assert cond == [[cond[0][0], {"x": 1}]]
    no_model, no_clip, lora_hooks = hooks.load_hook_lora_for_models(None, None, {}, 1.0, 1.0)
    assert no_model is None and no_clip is None and isinstance(lora_hooks, core_hooks.HookGroup)


# ---- controlnet ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", FIXTURE["broadcast_image_to"], ids=lambda c: f"{c['n']}-{c['target']}-{c['batched']}")
def test_broadcast_image_to_matches_comfyui(case):
    n = case["n"]
    images = torch.arange(n * 4, dtype=torch.float32).reshape(n, 1, 2, 2)
    out = controlnet.broadcast_image_to(images, case["target"], case["batched"])
    assert out[:, 0, 0, 0].tolist() == case["out"]


def test_controlnet_classes_exist_for_isinstance_and_refuse_construction():
    assert issubclass(controlnet.ControlLora, controlnet.ControlNet)
    assert issubclass(controlnet.T2IAdapter, controlnet.ControlBase)
    with pytest.raises(UnsupportedFeature, match="ControlNet"):
        controlnet.ControlNet()
    with pytest.raises(FileNotFoundError):
        controlnet.load_controlnet("/nonexistent/cn.safetensors")


# ---- samplers: cond batching ---------------------------------------------------------------------------


class Cond:
    """ComfyUI's CONDRegular behaviour (repeat to the batch, concat when shapes match)."""

    def __init__(self, cond):
        self.cond = cond

    def process_cond(self, batch_size, **kwargs):
        reps = -(-batch_size // self.cond.shape[0])
        return Cond(self.cond.repeat((reps,) + (1,) * (self.cond.ndim - 1))[:batch_size])

    def can_concat(self, other):
        return self.cond.shape == other.cond.shape

    def concat(self, others):
        return torch.cat([self.cond] + [o.cond for o in others])


def entry(ctx=1.0, **kw):
    return {"model_conds": {"c_crossattn": Cond(torch.ones(1, 3, 4) * ctx)}, "uuid": "u", **kw}


def x_in():
    return torch.arange(2 * 2 * 16 * 12, dtype=torch.float32).reshape(2, 2, 16, 12) / 100


AREA_CASES = {
    "plain": {},
    "area_inner": {"area": (8, 6, 4, 3), "strength": 0.5},
    "area_corner": {"area": (8, 6, 0, 0)},
    "area_overflow": {"area": (20, 20, 10, 2)},
    "mask": {"mask": True, "mask_strength": 0.8, "strength": 1.5},
    "mask_area": {"mask": True, "area": (8, 6, 4, 3)},
    "timestep_out": {"timestep_start": 5.0},
    "timestep_end_out": {"timestep_end": 20.0},
    "timestep_in": {"timestep_start": 15.0, "timestep_end": 5.0},
}


@pytest.mark.parametrize("name", AREA_CASES)
def test_get_area_and_mult_matches_comfyui(name):
    kw = dict(AREA_CASES[name])
    if kw.pop("mask", False):
        kw["mask"] = (torch.arange(16 * 12, dtype=torch.float32).reshape(1, 16, 12) % 7) / 7
    r = samplers.get_area_and_mult(entry(**kw), x_in(), torch.tensor([10.0, 10.0]))
    want = FIXTURE["get_area_and_mult"][name]
    if want is None:
        assert r is None
        return
    assert r.area == want["area"]
    assert list(r.input_x.shape) == want["input_shape"] and r.input_x[0, 0, 0, 0].item() == want["input_first"]
    assert list(r.mult.shape) == want["mult_shape"]
    torch.testing.assert_close(r.mult[1, 1], torch.tensor(want["mult"]), rtol=0, atol=1e-6)
    assert list(r.conditioning["c_crossattn"].cond.shape) == want["cond_shape"]


def test_cond_batching_concats_like_comfyui():
    t = torch.tensor([10.0, 10.0])
    a, b = samplers.get_area_and_mult(entry(1.0), x_in(), t), samplers.get_area_and_mult(entry(2.0), x_in(), t)
    c = samplers.get_area_and_mult(entry(area=(8, 6, 4, 3)), x_in(), t)
    want = FIXTURE["concat"]
    assert samplers.can_concat_cond(a, b) is want["same"]
    assert samplers.can_concat_cond(a, c) is want["other_area"]
    assert samplers.cond_cat([a.conditioning, b.conditioning])["c_crossattn"].tolist() == want["cat"]
    with_control = a._replace(control=object())
    assert not samplers.can_concat_cond(a, with_control)


# ---- stable3d, chainner, small names ---------------------------------------------------------------------


@pytest.mark.parametrize("case", FIXTURE["camera_embeddings"], ids=lambda c: f"{c['elevation']}-{c['azimuth']}")
def test_camera_embeddings_match_comfyui(case):
    out = camera_embeddings(case["elevation"], case["azimuth"])
    torch.testing.assert_close(out, torch.tensor(case["out"]), rtol=0, atol=1e-6)


def test_chainner_load_state_dict_gives_a_runnable_upscale_model():
    from nodes.models.esrgan import ESRGANConfig, RRDBNet

    torch.manual_seed(0)
    sd = RRDBNet(ESRGANConfig(in_nc=3, out_nc=3, nf=8, blocks=2, scale=2, plus=False, shuffle=None)).state_dict()
    model = model_loading.load_state_dict(sd).eval()
    assert model.scale == 2 and model.to("cpu") is model
    out = model(torch.rand(1, 3, 5, 6))
    assert out.shape == (1, 3, 10, 12) and 0 <= out.min() and out.max() <= 1
    with pytest.raises(Exception, match="upscale model"):
        model_loading.load_state_dict({"foo.weight": torch.zeros(1)})


def test_small_module_names_packs_read():
    assert sample.np.__name__ == "numpy"
    assert model_management.get_autocast_device(torch.device("cpu")) == "cpu"
    assert model_management.get_autocast_device("cuda:0") == "cuda"
    ns = cli_args.parser.parse_args(["--port", "9000", "--not-a-comfy-flag", "--listen"])
    assert (ns.port, ns.listen, ns.cpu) == (9000, "0.0.0.0,::", True)
    assert cli_args.parser.parse_args([]).listen == "127.0.0.1"
    from comfy_bridge.compat.comfy_api.torch_helpers import set_torch_compile_wrapper

    with pytest.raises(ValueError, match="expected a MODEL"):
        set_torch_compile_wrapper(model=None, backend="inductor")
