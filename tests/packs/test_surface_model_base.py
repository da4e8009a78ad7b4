"""comfy.model_base / model_sampling / supported_models / model_detection / sd / sdxl_clip / sd3_clip /
multigpu: what packs use at import time works with ComfyUI's names and numbers (fixture recorded on ComfyUI
0.3.64 by scripts/record_comfyui_model_surface.py); building in-process models refuses with a clear message."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from comfy_bridge.compat.comfy import (
    model_base,
    model_detection,
    model_sampling,
    multigpu,
    sd,
    sd3_clip,
    sdxl_clip,
    supported_models,
    supported_models_base,
)
from comfy_bridge.compat.comfy.text_encoders import sd3_clip as te_sd3_clip
from comfy_bridge.packs.origin import UnsupportedFeature
from tests.float_tolerance import ulps_of_largest

from .recorded import load, ramp, tensor

FIXTURE = load("comfyui_model_surface.json")


def close(ours: torch.Tensor, entry: dict, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    torch.testing.assert_close(ours.float(), tensor(entry), rtol=rtol, atol=atol)


def test_model_type_has_comfyuis_members_and_values():
    assert {m.name: m.value for m in model_base.ModelType} == FIXTURE["model_type"]


@pytest.mark.parametrize("case", FIXTURE["sampling"], ids=lambda c: f"{c['type']}-{c['settings']}")
def test_model_sampling_of_a_config_matches_comfyui(case):
    config = type("Config", (), {"sampling_settings": dict(case["settings"])})()
    ms = model_base.model_sampling(config, model_base.ModelType[case["type"]])
    assert len(ms.sigmas) == case["n"]
    close(ms.sigmas[:: max(1, len(ms.sigmas) // 50)], case["sigmas"])
    assert float(ms.sigma_min) == pytest.approx(case["sigma_min"], rel=1e-6)
    assert float(ms.sigma_max) == pytest.approx(case["sigma_max"], rel=1e-6)
    sigma = torch.stack([ms.sigmas[len(ms.sigmas) // 3], ms.sigmas[-2]]).float()
    close(ms.timestep(sigma), case["timestep"])
    close(torch.stack([torch.as_tensor(ms.sigma(t)).float() for t in ms.timestep(sigma)]), case["sigma"])
    assert [float(ms.percent_to_sigma(p)) for p in (0.0, 0.25, 0.6, 1.0)] == pytest.approx(case["percent"], rel=1e-6)
    x, out = ramp(2, 4, 3, 3), ramp(2, 4, 3, 3, shift=0.7)
    close(ms.calculate_input(sigma, x), case["input"])
    close(ms.calculate_denoised(sigma, out, x), case["denoised"])
    close(ms.noise_scaling(sigma, out, x.clone(), max_denoise=False), case["noise"])
    close(ms.noise_scaling(sigma, out, x.clone(), max_denoise=True), case["noise_max"])
    close(ms.inverse_noise_scaling(sigma * 0.5, x), case["inverse"])


def test_packs_mix_schedules_and_parameterisations_as_in_comfyui():
    class InverseConst:  # Fluxtapoz's pattern: a pack's own parameterisation on a ComfyUI schedule
        def calculate_denoised(self, sigma, model_output, model_input):
            return model_output

    class Advanced(model_sampling.ModelSamplingFlux, InverseConst):
        pass

    config = supported_models.Flux({})
    ms = Advanced(config)
    ms.set_parameters(shift=2.5)
    assert ms.shift == 2.5 and len(ms.sigmas) == 10000
    assert float(ms.percent_to_sigma(0.5)) == pytest.approx(model_sampling.flux_time_shift(2.5, 1.0, 0.5))
    assert isinstance(ms, torch.nn.Module) and "sigmas" in dict(ms.named_buffers())

    class Discrete(model_sampling.ModelSamplingDiscrete, model_sampling.EPS):
        pass

    d = Discrete(supported_models.SD15({}))
    before = d.sigmas.clone()
    d.set_sigmas(model_sampling.rescale_zero_terminal_snr_sigmas(d.sigmas.double()))  # AnimateDiff's zsnr
    assert d.sigmas[0] == pytest.approx(float(before[0]), rel=1e-3) and float(d.sigmas[-1]) > 4000
    assert not isinstance(model_sampling.CONST(), model_sampling.EPS)
    assert issubclass(model_sampling.X0, model_sampling.EPS) and issubclass(
        model_sampling.EDM, model_sampling.V_PREDICTION
    )


@pytest.mark.parametrize("case", FIXTURE["lcm"], ids=lambda c: f"{c['original_timesteps']}-zsnr{c['zsnr']}")
def test_lcm_sampling_of_nodes_model_advanced_matches_comfyui(case):
    # AnimateDiff-Evolved's pattern: a distilled table of original_timesteps, combined with LCM
    import comfy_bridge.compat as compat

    compat.install()
    import comfy_extras.nodes_model_advanced as adv

    base = type("Distilled", (adv.ModelSamplingDiscreteDistilled,), {"original_timesteps": case["original_timesteps"]})
    ms = type("Advanced", (base, adv.LCM), {})(None, zsnr=case["zsnr"])
    close(ms.sigmas, case["sigmas"])
    sigma = torch.stack([ms.sigmas[len(ms.sigmas) // 3], ms.sigmas[-2]]).float()
    close(ms.timestep(sigma), case["timestep"])
    close(ms.sigma(ms.timestep(sigma) + 0.5), case["sigma"])
    x, out = ramp(2, 4, 3, 3), ramp(2, 4, 3, 3, shift=0.7)
    close(ms.calculate_denoised(sigma, out, x), case["denoised"])


def test_timestep_embedding_matches_comfyui():
    # sin/cos of (timestep x frequency): the frequencies (an exp) and so the arguments round by an ulp differently on
    # different CPUs, and sin/cos pass an argument's error through, so the bound is 4 float32 ulps of the largest
    # timestep (recorded on another CPU; on an AVX-512 one the embedding of 1024, whose ulp is 6.1e-5, came out
    # 3.0e-5 apart in 2 of 768 values).
    timesteps = torch.tensor([1024.0, 0.0, 37.5])
    close(
        model_base.Timestep(256)(timesteps), FIXTURE["timestep_embedding"], rtol=0, atol=ulps_of_largest(timesteps, 4)
    )
    close(model_base.Timestep(7)(torch.tensor([3.0])), FIXTURE["timestep_embedding_odd"])


def test_sdxl_pooled_passes_the_pooled_output_and_refuses_unclip():
    pooled = torch.ones(1, 1280)
    assert model_base.sdxl_pooled({"pooled_output": pooled}, None) is pooled
    with pytest.raises(UnsupportedFeature, match="unclip"):
        model_base.sdxl_pooled({"unclip_conditioning": [], "pooled_output": pooled}, None)


def test_model_classes_subclass_and_refuse_to_build():
    # Easy-Use's Kolors: a subclass of SDXL calling BaseModel.__init__ with its own unet class
    class KolorsSDXL(model_base.SDXL):
        def __init__(self, model_config, model_type=model_base.ModelType.EPS, device=None):
            model_base.BaseModel.__init__(self, model_config, model_type, device=device, unet_model=object)

    with pytest.raises(UnsupportedFeature, match="KolorsSDXL.*executors"):
        KolorsSDXL(supported_models.SDXL({"in_channels": 4}))
    for cls in (model_base.BaseModel, model_base.SDXLRefiner, model_base.SVD_img2vid, model_base.SD21UNCLIP):
        with pytest.raises(UnsupportedFeature):
            cls(None)
    with pytest.raises(UnsupportedFeature):
        model_base.CLIPEmbeddingNoiseAugmentation(noise_schedule_config={}, timestep_dim=1280)
    assert issubclass(model_base.SDXL_instructpix2pix, model_base.SDXL)
    assert issubclass(model_base.Chroma, model_base.Flux)


def _ours_for(name: str) -> type:
    return getattr(supported_models, name)


def test_supported_model_configs_hold_comfyuis_attributes():
    recorded = FIXTURE["supported_models"]
    ours = [c.__name__ for c in supported_models.models]
    assert ours == [name for name in recorded["order"] if name in ours]
    for name in ours:
        cls, want = _ours_for(name), recorded["classes"][name]
        assert repr(cls.unet_config) == want["unet_config"], name
        assert repr(cls.unet_extra_config) == want["unet_extra_config"], name
        assert repr(cls.sampling_settings) == want["sampling_settings"], name
        assert repr(cls.noise_aug_config) == want["noise_aug_config"], name
        assert cls.latent_format.__name__ == want["latent_format"], name
        assert cls.memory_usage_factor == want["memory_usage_factor"], name
        assert [b.__name__ for b in cls.__bases__] == want["bases"], name


def test_supported_model_config_instances_behave_like_comfyuis():
    config = supported_models.SDXL({"in_channels": 4})
    assert config.unet_config == {"in_channels": 4, "num_heads": -1, "num_head_channels": 64}
    assert config.sampling_settings is not supported_models.SDXL.sampling_settings
    assert config.model_type({}) == model_base.ModelType.EPS and not config.inpaint_model()
    assert config.model_type({"v_pred": 1, "ztsnr": 1}) == model_base.ModelType.V_PREDICTION
    assert config.sampling_settings["zsnr"] is True
    playground = supported_models.SDXL({"in_channels": 4})
    assert playground.model_type({"edm_mean": 0, "edm_std": 0}) == model_base.ModelType.EDM
    assert type(playground.latent_format).__name__ == "SDXL_Playground_2_5"
    assert supported_models.SD20({"in_channels": 9}).inpaint_model()
    assert isinstance(config, supported_models.supported_models_base.BASE)
    with pytest.raises(UnsupportedFeature):
        config.get_model({})

    class PixArtConfig(supported_models_base.BASE):  # Easy-Use's PixArt config pattern
        unet_config: dict = {}
        latent_format = supported_models.latent_formats.SD15

        def __init__(self, conf):
            self.sampling_settings = conf.get("sampling_settings", {})
            self.latent_format = self.latent_format()

    pixart = PixArtConfig({"sampling_settings": {"beta_schedule": "sqrt_linear"}})
    ms = model_base.model_sampling(pixart, model_base.ModelType.EPS)
    assert ms.sigmas.shape == (1000,)


def test_model_detection_helpers_match_comfyui():
    want = FIXTURE["detection"]
    keys = [f"model.diffusion_model.input_blocks.{i}.0.weight" for i in range(12)] + ["first_stage_model.x"]
    assert model_detection.count_blocks(keys, "model.diffusion_model.input_blocks.{}.") == want["count_blocks"]
    assert [
        model_detection.unet_prefix_from_state_dict(dict.fromkeys(keys)),
        model_detection.unet_prefix_from_state_dict(dict.fromkeys(keys[:4])),
        model_detection.unet_prefix_from_state_dict({f"net.b{i}": 0 for i in range(8)}),
    ] == want["prefix"]
    yaml_cfg = {
        "num_res_blocks": 2,
        "channel_mult": [1, 2, 4, 4],
        "attention_resolutions": [4, 2, 1],
        "transformer_depth": 1,
        "model_channels": 320,
    }
    assert repr(model_detection.convert_config(yaml_cfg)) == want["convert_config"]
    assert (
        repr(
            model_detection.convert_config(
                {
                    "num_res_blocks": [1, 2],
                    "channel_mult": [1, 2],
                    "attention_resolutions": [2],
                    "transformer_depth": [3, 5],
                    "transformer_depth_middle": 7,
                }
            )
        )
        == want["convert_config_middle"]
    )
    found = model_detection.model_config_from_unet_config(dict(supported_models.SDXL.unet_config, in_channels=4))
    assert type(found).__name__ == want["sdxl_config"]
    assert model_detection.unet_config_from_diffusers_unet({}) is None  # no conv_in: not a diffusers UNet
    with pytest.raises(UnsupportedFeature):
        model_detection.model_config_from_unet({}, "")


def test_sd_loaders_and_text_encoder_classes():
    assert sd.model_detection is model_detection
    assert sd.load_diffusion_model_state_dict({}) is None  # no model detected, as ComfyUI answers
    for cls in (
        sdxl_clip.SDXLClipModel,
        sdxl_clip.SDXLRefinerClipModel,
        sdxl_clip.SDXLClipG,
        te_sd3_clip.SD3ClipModel,
        te_sd3_clip.T5XXLModel,
    ):
        with pytest.raises(UnsupportedFeature, match="executors"):
            cls(clip_l=False, clip_g=False, t5=False)
    assert not isinstance(object(), (sdxl_clip.SDXLClipModel, sdxl_clip.SDXLRefinerClipModel, sdxl_clip.SDXLClipG))
    assert sd3_clip.SD3ClipModel is te_sd3_clip.SD3ClipModel and sd3_clip.T5XXLModel is te_sd3_clip.T5XXLModel
    weight = torch.zeros(2, dtype=torch.bfloat16)
    assert te_sd3_clip.t5_xxl_detect({"t5.encoder.final_layer_norm.weight": weight}, "t5.") == {
        "dtype_t5": torch.bfloat16
    }


def test_multigpu_refuses_and_is_not_imported_eagerly():
    with pytest.raises(UnsupportedFeature, match="multi-GPU"):
        multigpu.load_balance_devices({}, 4, return_idle_time=True)
    import subprocess
    import sys

    code = (
        "import comfy_bridge.compat as c; c.install(); import comfy, comfy.model_base, comfy.samplers, "
        "comfy.model_patcher; print(hasattr(comfy, 'multigpu'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert out.stdout.strip() == "False"  # as in ComfyUI 0.3.64, which has no comfy.multigpu
