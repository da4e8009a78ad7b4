"""The sampling patches of comfy_extras.nodes_model_advanced / nodes_cfg / nodes_eps against their published
formulas, computed here independently: the sigma tables and parameterisations the ModelSampling* nodes give a
MODEL, and the guidance functions applied to a toy denoiser's outputs. A patched MODEL keeps its weights."""

from __future__ import annotations

import math

import pytest
import torch

from cluster.refs import ModelRef
from nodes.library.cfg import CFGNorm, CFGZeroStar
from nodes.library.eps import EpsilonScaling
from nodes.library.model_advanced import (
    ModelSamplingAuraFlow,
    ModelSamplingContinuousV,
    ModelSamplingDiscrete,
    ModelSamplingFlux,
    ModelSamplingSD3,
    ModelSamplingStableCascade,
    RescaleCFG,
)
from nodes.modelfns.model_options import sampler_patches, sampling_config, weights_ref
from nodes.modelfns.model_patches import combine
from nodes.sampling.model_sampling import model_sampling_from_config

SD1 = ModelRef("diffusion_model", "sd1", ("/m/sd1.safetensors",), ("d" * 64,))


def sampling(model: ModelRef):
    return model_sampling_from_config(sampling_config(model))


def ddpm_sigmas() -> torch.Tensor:
    """SD1's table in float64: betas linear in sqrt between 0.00085 and 0.012."""
    betas = torch.linspace(0.00085**0.5, 0.012**0.5, 1000, dtype=torch.float64) ** 2
    ac = torch.cumprod(1 - betas, 0)
    return ((1 - ac) / ac).sqrt()


def test_unpatched_model_keeps_its_architecture_sampling():
    assert sampling_config(SD1) == {
        "kind": "discrete",
        "prediction": "eps",
        "beta_schedule": "scaled_linear",
        "linear_start": 0.00085,
        "linear_end": 0.012,
        "timesteps": 1000,
    }


def test_patches_keep_the_weights_of_the_plain_model():
    patched = RescaleCFG().patch(ModelSamplingSD3().patch(SD1, 2.0)[0], 0.5)[0]
    assert patched.key != SD1.key  # a different MODEL for the graph's caches
    assert weights_ref(patched) == SD1  # the same weights on the executors
    assert weights_ref(SD1) is SD1


@pytest.mark.parametrize("shift", [1.0, 3.0, 0.5])
def test_sd3_shift_gives_the_shifted_flow_table(shift):
    ms = sampling(ModelSamplingSD3().patch(SD1, shift)[0])
    t = torch.arange(1, 1001, dtype=torch.float64) / 1000
    expected = shift * t / (1 + (shift - 1) * t)
    assert torch.allclose(ms.sigmas.double(), expected, atol=1e-6)
    assert ms.is_const
    sigma = torch.tensor([0.7])
    assert torch.allclose(ms.timestep(sigma), sigma * 1000)
    x, out = torch.randn(1, 4, 2, 2), torch.randn(1, 4, 2, 2)
    assert torch.allclose(ms.calculate_denoised(sigma, out, x), x - 0.7 * out)  # rectified flow: x - sigma v
    assert torch.allclose(ms.noise_scaling(sigma, out, x), 0.7 * out + 0.3 * x)


def test_auraflow_timesteps_are_sigmas():
    ms = sampling(ModelSamplingAuraFlow().patch_aura(SD1, 1.73)[0])
    t = torch.arange(1, 1001, dtype=torch.float64) / 1000
    assert torch.allclose(ms.sigmas.double(), 1.73 * t / (1 + 0.73 * t), atol=1e-6)
    assert torch.allclose(ms.timestep(torch.tensor([0.25])), torch.tensor([0.25]))


def test_flux_shift_from_image_size():
    ms = sampling(ModelSamplingFlux().patch(SD1, 1.15, 0.5, 1024, 768)[0])
    mu = 0.5 + (1024 * 768 / 256 - 256) * (1.15 - 0.5) / (4096 - 256)
    t = torch.arange(1, 10001, dtype=torch.float64) / 10000
    expected = math.exp(mu) / (math.exp(mu) + (1 / t - 1))
    assert torch.allclose(ms.sigmas.double(), expected, atol=1e-6)


def test_discrete_v_prediction_zsnr_rescales_alphas():
    ms = sampling(ModelSamplingDiscrete().patch(SD1, "v_prediction", True)[0])
    sab = 1 / (ddpm_sigmas() ** 2 + 1).sqrt()
    sab = (sab - sab[-1]) * sab[0] / (sab[0] - sab[-1])  # Lin et al. 2023: zero terminal SNR
    ab = sab**2
    assert torch.allclose(ms.sigmas[:-1].double(), ((1 - ab[:-1]) / ab[:-1]).sqrt(), rtol=1e-5)
    assert 4000 < float(ms.sigma_max) < 5000  # ComfyUI keeps the last alpha_bar just above zero
    s, x, v = torch.tensor([2.0]), torch.randn(1, 4, 2, 2), torch.randn(1, 4, 2, 2)
    alpha, sig = 1 / math.sqrt(5), 2 / math.sqrt(5)  # x_t/sqrt(1+s^2) = alpha x0 + sig eps; x0 = alpha z - sig v
    assert torch.allclose(ms.calculate_denoised(s, v, x), alpha * (alpha * x) - sig * v, atol=1e-6)
    assert torch.allclose(ms.calculate_input(s, x), x / math.sqrt(5))


def test_discrete_eps_keeps_the_model_table():
    ms = sampling(ModelSamplingDiscrete().patch(SD1, "eps", False)[0])
    assert torch.allclose(ms.sigmas.double(), ddpm_sigmas(), rtol=1e-6)


def test_x0_and_img_to_img_return_the_model_output():
    s, x, out = torch.tensor([3.0]), torch.randn(1, 4, 2, 2), torch.randn(1, 4, 2, 2)
    x0 = sampling(ModelSamplingDiscrete().patch(SD1, "x0", False)[0])
    i2i = sampling(ModelSamplingDiscrete().patch(SD1, "img_to_img", False)[0])
    assert torch.equal(x0.calculate_denoised(s, out, x), out) and torch.equal(i2i.calculate_denoised(s, out, x), out)
    assert torch.allclose(x0.calculate_input(s, x), x / math.sqrt(10))
    assert torch.equal(i2i.calculate_input(s, x), x)


def test_lcm_uses_every_twentieth_sigma_and_consistency_coefficients():
    ms = sampling(ModelSamplingDiscrete().patch(SD1, "lcm", False)[0])
    full = ddpm_sigmas().float()
    assert torch.equal(ms.sigmas, full[19::20])
    s = ms.sigmas[10:11]
    t = ms.timestep(s)
    assert int(t) == 10 * 20 + 19
    x, eps = torch.randn(1, 4, 2, 2), torch.randn(1, 4, 2, 2)
    ts = float(t) * 10
    c_skip, c_out = 0.25 / (ts**2 + 0.25), ts / math.sqrt(ts**2 + 0.25)
    expected = c_out * (x - eps * s) + c_skip * x
    assert torch.allclose(ms.calculate_denoised(s, eps, x), expected, atol=1e-5)


def test_stable_cascade_cosine_schedule():
    ms = sampling(ModelSamplingStableCascade().patch(SD1, 1.0)[0])
    t = torch.arange(1, 10001, dtype=torch.float64) / 10000
    ac = torch.cos((t + 0.008) / 1.008 * math.pi / 2) ** 2 / math.cos(0.008 / 1.008 * math.pi / 2) ** 2
    ac = ac.clamp(1e-4, 0.9999)
    # float32 like ComfyUI: 1 - alpha_bar near the 0.9999 clamp keeps only ~3 significant digits
    assert torch.allclose(ms.sigmas.double(), ((1 - ac) / ac).sqrt(), rtol=1e-3)
    shifted = sampling(ModelSamplingStableCascade().patch(SD1, 2.0)[0])
    # shift 2 lowers log-SNR by 2 log 2: alpha_bar' = sigmoid(logit(alpha_bar) - log 4)
    a = float(((1 - ac) / ac).sqrt()[5000]) ** 2
    assert math.isclose(float(shifted.sigmas[5000]) ** 2, 4 * a, rel_tol=1e-4)


def test_continuous_v_table_and_timesteps():
    ms = sampling(ModelSamplingContinuousV().patch(SD1, "v_prediction", 500.0, 0.03)[0])
    assert torch.allclose(
        ms.sigmas.double(), torch.logspace(math.log10(0.03), math.log10(500), 1000, dtype=torch.float64), rtol=1e-4
    )
    s = torch.tensor([1.0])
    assert torch.allclose(ms.timestep(s), torch.tensor([0.5]))  # atan(1) * 2 / pi
    assert math.isclose(ms.percent_to_sigma(0.5), math.sqrt(0.03 * 500), rel_tol=1e-4)


# --- guidance functions on a toy denoiser's outputs ------------------------------------------------------------


def toy(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 4, 3, 3, generator=g) * 5
    cond, uncond = torch.randn(2, 4, 3, 3, generator=g), torch.randn(2, 4, 3, 3, generator=g)
    return x, cond, uncond, torch.tensor([4.0, 4.0])


def guided(model: ModelRef, cfg: float = 6.0):
    x, cond, uncond, sigma = toy()
    out = combine(sampler_patches(model), cond, uncond, cfg, x, sigma, None, ([], []))
    return out, (x, cond, uncond, sigma)


def test_rescale_cfg_matches_lin_et_al():
    out, (x, cond, uncond, sigma) = guided(RescaleCFG().patch(SD1, 0.7)[0])
    s = sigma.view(-1, 1, 1, 1)
    alpha, sig = 1 / (1 + s**2).sqrt(), s / (1 + s**2).sqrt()
    z = x * alpha  # the VP-scaled latent
    v_c, v_u = (alpha * (x - d) / s - sig * d for d in (cond, uncond))  # v = alpha eps - sigma x0
    v_cfg = v_u + 6.0 * (v_c - v_u)
    std = lambda t: t.std(dim=(1, 2, 3), keepdim=True)  # noqa: E731
    v = 0.7 * v_cfg * std(v_c) / std(v_cfg) + 0.3 * v_cfg
    x0 = alpha * z - sig * v  # back to a denoised prediction
    assert torch.allclose(out, x0, atol=1e-4)


def test_rescale_cfg_zero_is_plain_cfg():
    out, (x, cond, uncond, _) = guided(RescaleCFG().patch(SD1, 0.0)[0])
    assert torch.allclose(out, uncond + 6.0 * (cond - uncond), atol=1e-4)


def test_cfg_zero_star_scales_the_uncond_by_its_projection():
    out, (x, cond, uncond, _) = guided(CFGZeroStar().patch(SD1)[0])
    ec, eu = (x - cond).flatten(1), (x - uncond).flatten(1)
    st = ((ec * eu).sum(1) / (eu * eu).sum(1)).view(-1, 1, 1, 1)
    assert torch.allclose(out, st * uncond + 6.0 * (cond - st * uncond), atol=1e-4)


def test_cfg_norm_caps_the_channel_norm():
    out, (x, cond, uncond, _) = guided(CFGNorm().patch(SD1, 0.8)[0])
    plain = uncond + 6.0 * (cond - uncond)
    ratio = cond.norm(dim=1, keepdim=True) / plain.norm(dim=1, keepdim=True)
    assert torch.allclose(out, plain * ratio.clamp(max=1.0) * 0.8, atol=1e-5)


def test_epsilon_scaling_divides_the_noise_estimate():
    out, (x, cond, uncond, _) = guided(EpsilonScaling().patch(SD1, 1.25)[0])
    plain = uncond + 6.0 * (cond - uncond)
    assert torch.allclose(out, x - (x - plain) / 1.25, atol=1e-5)


def test_patches_compose_in_the_order_applied():
    both = EpsilonScaling().patch(CFGNorm().patch(SD1, 1.0)[0], 1.1)[0]
    patches = sampler_patches(both)
    assert [type(f).__name__ for f in patches["sampler_post_cfg_function"]] == [
        "CfgNormFunction",
        "EpsilonScalingFunction",
    ]
    later = ModelSamplingSD3().patch(ModelSamplingDiscrete().patch(SD1, "x0", False)[0], 2.0)[0]
    assert sampling_config(later)["kind"] == "flow"  # a later sampling patch replaces an earlier one


def test_non_model_inputs_are_refused():
    with pytest.raises(ValueError, match="model: expected a MODEL"):
        RescaleCFG().patch("nope", 0.5)
