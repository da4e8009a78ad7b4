"""A node pack's own sampler (a KSAMPLER of its k-diffusion function, or its Sampler subclass) passed to
comfy.sample.sample_custom / comfy.samplers.sample runs as in ComfyUI: its `sample` in the pack's process around a
guider model whose calls are CFG-guided predictions (here each one evaluated on the executors). Checked against
ComfyUI's documented semantics: a pack's hand-written Euler or DPM2 loop samples what the built-in euler / dpm_2
sampler does, also with a noise mask, and ComfyUI's callback(step, x0, x, total_steps) sees every step."""

from __future__ import annotations

import asyncio

import pytest
import torch

CKPT = "sd1-tiny.safetensors"
SIGMAS = torch.tensor([14.6, 3.0, 0.6, 0.0])


def to_d(x, sigma, denoised):
    return (x - denoised) / sigma


def pack_euler(model, x, sigmas, extra_args=None, callback=None, disable=None):
    """k-diffusion's sample_euler as packs write it (no churn)."""
    extra_args = extra_args or {}
    s_in = x.new_ones([x.shape[0]])
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * s_in, **extra_args)
        if callback is not None:
            callback({"x": x, "i": i, "sigma": sigmas[i], "sigma_hat": sigmas[i], "denoised": denoised})
        x = x + to_d(x, sigmas[i], denoised) * (sigmas[i + 1] - sigmas[i])
    return x


def pack_dpm_2(model, x, sigmas, extra_args=None, callback=None, disable=None):
    """k-diffusion's sample_dpm_2: its second evaluation is at a sigma between two of the schedule's."""
    extra_args = extra_args or {}
    s_in = x.new_ones([x.shape[0]])
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * s_in, **extra_args)
        d = to_d(x, sigmas[i], denoised)
        if sigmas[i + 1] == 0:
            x = x + d * (sigmas[i + 1] - sigmas[i])
            continue
        sigma_mid = sigmas[i].log().lerp(sigmas[i + 1].log(), 0.5).exp()
        x_2 = x + d * (sigma_mid - sigmas[i])
        denoised_2 = model(x_2, sigma_mid * s_in, **extra_args)
        x = x + to_d(x_2, sigma_mid, denoised_2) * (sigmas[i + 1] - sigmas[i])
    return x


@pytest.fixture
def sd1(demo_workspace, fixed_threads):
    from comfy_bridge.packs.proxies import wrap
    from nodes.loaders import CheckpointLoaderSimple
    from nodes.model_nodes import CLIPTextEncode

    model, clip, _ = CheckpointLoaderSimple().load_checkpoint(CKPT)

    async def encode():
        enc = CLIPTextEncode()
        return (await enc.encode(clip, "a red fox"))[0], (await enc.encode(clip, ""))[0]

    positive, negative = asyncio.run(encode())
    return wrap(model), positive, negative


def _core(model, positive, negative, name, latent, noise, mask=None):
    from comfy_bridge.compat.comfy import sample, samplers

    sampler = samplers.sampler_object(name)
    return sample.sample_custom(model, noise, 4.0, sampler, SIGMAS, positive, negative, latent, mask, seed=7)


@pytest.mark.parametrize(("function", "name"), [(pack_euler, "euler"), (pack_dpm_2, "dpm_2")])
def test_a_packs_sampler_function_samples_as_the_built_in_sampler(sd1, function, name):
    from comfy_bridge.compat.comfy import sample, samplers
    from nodes.sampling.noise import prepare_noise

    model, positive, negative = sd1
    latent = torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(3))
    noise = prepare_noise(latent, 7)
    want = _core(model, positive, negative, name, latent, noise)
    custom = samplers.KSAMPLER(function)
    got = sample.sample_custom(model, noise, 4.0, custom, SIGMAS, positive, negative, latent, seed=7)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    got = samplers.sample(model, noise, positive, negative, 4.0, "cpu", custom, SIGMAS, latent_image=latent, seed=7)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_a_packs_sampler_function_with_a_noise_mask_and_callback(sd1):
    from comfy_bridge.compat.comfy import sample, samplers
    from nodes.sampling.noise import prepare_noise

    model, positive, negative = sd1
    latent = torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(4))
    noise = prepare_noise(latent, 7)
    mask = torch.zeros(1, 64, 64)
    mask[:, :, :32] = 1.0  # repaint the left half
    want = _core(model, positive, negative, "euler", latent, noise, mask)
    steps = []
    got = sample.sample_custom(
        model,
        noise,
        4.0,
        samplers.KSAMPLER(pack_euler),
        SIGMAS,
        positive,
        negative,
        latent,
        mask,
        callback=lambda step, x0, x, total: steps.append((step, total, x0.shape)),
        seed=7,
    )
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(got[..., 4:], latent[..., 4:])  # outside the mask the latent is kept
    assert steps == [(i, 3, (1, 4, 8, 8)) for i in range(3)]


def test_a_packs_sampler_subclass_gets_the_guider_as_comfyui_passes_it(sd1):
    """A Sampler subclass's sample(model_wrap, sigmas, extra_args, callback, noise, latent_image, denoise_mask,
    disable_pbar): the guider's inner_model carries the MODEL's model_sampling, extra_args its model_options and
    the seed, and a call gives the guided prediction (the first Euler step's x0 here)."""
    from comfy_bridge.compat.comfy import sample, samplers
    from nodes.sampling.noise import prepare_noise

    model, positive, negative = sd1
    seen = {}

    class OneStep(samplers.Sampler):
        def sample(self, model_wrap, sigmas, extra_args, callback, noise, latent_image=None, denoise_mask=None, *a):
            ms = model_wrap.inner_model.model_sampling
            seen.update(extra_args=extra_args, sigma_max=float(ms.sigma_max), cfg=model_wrap.cfg)
            x = ms.noise_scaling(sigmas[0], noise, latent_image, self.max_denoise(model_wrap, sigmas))
            return model_wrap(x, sigmas[0].expand(x.shape[0]), **extra_args)

    latent = torch.zeros(1, 4, 8, 8)
    noise = prepare_noise(latent, 5)
    got = sample.sample_custom(model, noise, 4.0, OneStep(), SIGMAS[[0, -1]], positive, negative, latent, seed=5)
    euler_one = sample.sample_custom(
        model, noise, 4.0, samplers.sampler_object("euler"), SIGMAS[[0, -1]], positive, negative, latent, seed=5
    )
    torch.testing.assert_close(got, euler_one, rtol=1e-4, atol=1e-4)  # one Euler step to sigma 0 is its x0
    assert seen["extra_args"]["seed"] == 5 and "model_options" in seen["extra_args"]
    assert seen["cfg"] == 4.0 and seen["sigma_max"] == pytest.approx(14.6146, abs=1e-3)


@pytest.fixture(scope="module")
def cluster():
    from cluster.executor.local_cluster import start_local_cluster

    head, rt = start_local_cluster(1, threads_per_executor=1)
    yield rt
    head.stop()


def test_a_packs_sampler_function_evaluates_on_an_executor(sd1, cluster):
    """In a prompt on a cluster the pack's loop runs here and each evaluation on the executor: the same latent."""
    from cluster.runtime import restore_runtime, use_runtime
    from comfy_bridge.compat.comfy import sample, samplers
    from nodes.sampling.noise import prepare_noise

    model, positive, negative = sd1
    latent = torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(3))
    noise = prepare_noise(latent, 7)
    want = _core(model, positive, negative, "dpm_2", latent, noise)
    calls = []
    token = use_runtime(cluster)
    try:
        original = cluster.call

        async def counting(fn, *args, **kwargs):
            calls.append(fn)
            return await original(fn, *args, **kwargs)

        cluster.call = counting
        got = sample.sample_custom(model, noise, 4.0, samplers.KSAMPLER(pack_dpm_2), SIGMAS, positive, negative, latent)
    finally:
        cluster.call = original
        restore_runtime(token)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    assert calls == ["denoise_step"] * 5  # two evaluations per step but the last, each on the cluster
