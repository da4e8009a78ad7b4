"""The default SD1 workflow (workflows_json/text_to_image.json: euler, normal, CFG 8, 20 steps, 128 px)
rendered by our engine against an independent reference: a k-diffusion Euler loop written here on the
diffusers/transformers modules of the same loaded sd1-tiny weights (UNet2DConditionModel, AutoencoderKL,
CLIPTextModel) with ComfyUI's sampling numbers, none of them taken from our nodes/sampling code:

- initial noise: ComfyUI's prepare_noise, `torch.randn` of the latent's shape from a CPU generator
  seeded with the seed, scaled by sqrt(1 + sigma_max^2) (EPS noise_scaling with max_denoise);
- sigmas: ComfyUI's ModelSamplingDiscrete from the betas in closed form (scaled_linear, float64, table
  cast to float32) and its 'normal' scheduler (timesteps linspace(999, 0, steps), sigma(t) by linear
  interpolation of log sigma, then a final 0), cross-checked against diffusers' own beta table;
- each step: UNet on x / sqrt(sigma^2 + 1) at timestep argmin |log sigma - log sigmas| (an integer, as
  ComfyUI's ModelSamplingDiscrete.timestep gives), denoised = x - eps * sigma, CFG
  uncond + (cond - uncond) * 8, Euler x += (x - denoised) / sigma * (sigma_next - sigma);
- latent out / 0.18215, VAE decode, (x + 1) / 2 clamped to [0, 1]; SaveImage's PNG is
  floor(255 * image) (numpy's astype(uint8) after clip).
Only the prompt's token ids come from our tokenizer ("the same prompt tokens"); their layout (start
token, 77 positions padded with the end token, as ComfyUI's SD1 tokenizer) is checked here.

Tolerances. Both sides run the same float32 kernels on one torch thread; measured, our engine's latent and
decoded image are bit-identical to this loop. A legitimate reordering of the float32 arithmetic
(CFG written as cond * 8 + uncond * (1 - 8)) moves the latent by 2.6e-4 (of a max magnitude 367,
7e-7 relative) and the image by 1.3e-6; the smallest sampler error probed, one sigma of the table off by
1 %, moves them by 5.5e-2 (1.5e-4 relative) and 2.0e-4. The bounds, 1e-5 relative on the latent and
1e-5 absolute on the image, sit ~10x above float noise and ~15x below that error. The image is partly
saturated by the random weights, which is why the latent (the sampler's output, the VAE's input) is
compared too."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from PIL import Image

REPO = Path(__file__).resolve().parents[2]
LATENT_RTOL = 1e-5
IMAGE_ATOL = 1e-5


def comfy_sd1_sigma_table() -> tuple[torch.Tensor, torch.Tensor]:
    """ComfyUI's ModelSamplingDiscrete for SD1 (linear_start 0.00085, linear_end 0.012, 1000 steps):
    (sigmas, log_sigmas), float32 from a float64 computation."""
    betas = torch.linspace(0.00085**0.5, 0.012**0.5, 1000, dtype=torch.float64) ** 2
    alphas_cumprod = torch.cumprod(1.0 - betas, dim=0)
    sigmas = ((1 - alphas_cumprod) / alphas_cumprod) ** 0.5
    return sigmas.float(), sigmas.log().float()


def comfy_normal_sigmas(steps: int) -> torch.Tensor:
    """ComfyUI's 'normal' scheduler on that table: evenly spaced timesteps from t(sigma_max) = 999 to
    t(sigma_min) = 0, sigma(t) by interpolating log sigma between neighbouring integers, then 0."""
    _, log_sigmas = comfy_sd1_sigma_table()
    out = []
    for t in torch.linspace(999, 0, steps):
        lo, hi, w = t.floor().long(), t.ceil().long(), t.frac()
        out.append(float(((1 - w) * log_sigmas[lo] + w * log_sigmas[hi]).exp()))
    return torch.tensor(out + [0.0], dtype=torch.float32)


def test_sigma_table_matches_diffusers_and_comfyui():
    """The closed form above against diffusers' scheduler table (its float32 betas) and ComfyUI's well-known
    SD1 end points (sigma_max 14.6146, sigma_min 0.0292)."""
    from diffusers import EulerDiscreteScheduler

    sched = EulerDiscreteScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear")
    ac = sched.alphas_cumprod.double()
    theirs = ((1 - ac) / ac) ** 0.5
    sigmas, _ = comfy_sd1_sigma_table()
    torch.testing.assert_close(sigmas.double(), theirs, rtol=1e-4, atol=0)
    normal = comfy_normal_sigmas(20)
    assert len(normal) == 21 and normal[-1] == 0
    assert round(float(normal[0]), 4) == 14.6146 and round(float(normal[-2]), 4) == 0.0292
    assert torch.all(normal[1:] < normal[:-1])


def _reference(prompt: dict, ckpt: Path) -> tuple[torch.Tensor, torch.Tensor]:
    """(latent after process_out [1,4,h,w], image [H,W,3] in [0,1]) from the independent loop."""
    from nodes.loaders import make_ref, probe_arch
    from nodes.models.loader import load_diffusion_model, load_text_encoder, load_vae

    arch, _ = probe_arch(ckpt)
    assert arch == "sd1"
    unet = load_diffusion_model(make_ref("diffusion_model", arch, [ckpt])).module
    vae = load_vae(make_ref("vae", arch, [ckpt])).module
    clip = load_text_encoder(make_ref("text_encoder", arch, [ckpt]))
    (side,) = clip.sides.values()
    text_model = side.module
    from diffusers import AutoencoderKL, UNet2DConditionModel
    from transformers import CLIPTextModel

    assert isinstance(unet, UNet2DConditionModel) and isinstance(vae, AutoencoderKL)
    assert isinstance(text_model, CLIPTextModel)

    vocab = text_model.config.vocab_size

    def token_ids(text: str) -> torch.Tensor:
        (chunk,) = clip.tokenize(text)["l"]
        ids = [t for t, _ in chunk]
        assert all(w == 1.0 for _, w in chunk)
        # ComfyUI's SD1 tokenizer: start token, the text, end token, padded with the end token to 77
        assert len(ids) == 77 and ids[0] == vocab - 2 and ids[-1] == vocab - 1
        body = ids[1 : ids.index(vocab - 1)]
        assert body and all(t < vocab - 2 for t in body)
        assert all(t == vocab - 1 for t in ids[len(body) + 1 :])
        return torch.tensor([ids])

    s = prompt["3"]["inputs"]
    size = prompt["5"]["inputs"]
    steps, cfg, seed = s["steps"], s["cfg"], s["seed"]
    with torch.no_grad():
        cond = text_model(input_ids=token_ids(prompt["6"]["inputs"]["text"])).last_hidden_state
        uncond = text_model(input_ids=token_ids(prompt["7"]["inputs"]["text"])).last_hidden_state
        context = torch.cat([cond, uncond])
        _, log_sigmas = comfy_sd1_sigma_table()
        sigmas = comfy_normal_sigmas(steps)
        shape = (1, 4, size["height"] // 8, size["width"] // 8)
        noise = torch.randn(shape, generator=torch.Generator(device="cpu").manual_seed(seed))
        x = noise * (1.0 + sigmas[0] ** 2) ** 0.5  # + the empty latent (zeros) * 0.18215
        for i in range(steps):
            sigma = sigmas[i]
            t = (sigma.log() - log_sigmas).abs().argmin().float()
            x_in = x / (sigma**2 + 1.0) ** 0.5
            eps = unet(torch.cat([x_in, x_in]), t.expand(2), encoder_hidden_states=context).sample
            den_cond, den_uncond = (x - eps * sigma).chunk(2)
            denoised = den_uncond + (den_cond - den_uncond) * cfg
            x = x + (x - denoised) / sigma * (sigmas[i + 1] - sigma)
        latent = x / 0.18215
        image = ((vae.decode(latent).sample + 1.0) / 2.0).clamp(0.0, 1.0)[0].permute(1, 2, 0)
    return latent, image


def test_default_sd1_workflow_matches_diffusers_reference(demo_workspace, fixed_threads, monkeypatch):
    from cluster.local import run_on_compute
    from comfy_bridge.cli.run import run_prompt
    from comfy_bridge.registry import build_registry
    from nodes.models import vae as vae_mod

    prompt = json.loads((REPO / "workflows_json" / "text_to_image.json").read_text())
    s = prompt["3"]["inputs"]
    assert (s["sampler_name"], s["scheduler"], s["cfg"], s["denoise"]) == ("euler", "normal", 8.0, 1.0)
    assert prompt["4"]["inputs"]["ckpt_name"] == "sd1-tiny.safetensors"

    # Record what our VAEDecode ModelFn receives and returns (in-process run: it runs in this process).
    seen: list[tuple[torch.Tensor, torch.Tensor]] = []
    decode = vae_mod.KLVAE.decode

    def recording_decode(self, latent):
        out = decode(self, latent)
        seen.append((latent.detach().clone(), out.detach().clone()))
        return out

    monkeypatch.setattr(vae_mod.KLVAE, "decode", recording_decode)
    (path,) = run_on_compute(lambda: run_prompt(prompt, None, build_registry(demo_workspace), show_progress=False))
    ((ours_latent, ours_image),) = seen
    png = np.asarray(Image.open(path)).astype(np.int64)
    monkeypatch.undo()

    ref_latent, ref_image = _reference(prompt, demo_workspace.full_path("checkpoints", "sd1-tiny.safetensors"))
    ours_image = ours_image[0]
    assert ours_latent.shape == ref_latent.shape and ours_image.shape == ref_image.shape == png.shape

    latent_diff = float((ours_latent - ref_latent).abs().max())
    scale = float(ref_latent.abs().max())
    image_diff = float((ours_image - ref_image).abs().max())
    print(f"latent max |diff| {latent_diff:.3g} (max |latent| {scale:.3g}); image max |diff| {image_diff:.3g}")
    assert latent_diff <= LATENT_RTOL * scale, f"sampler output differs from the reference by {latent_diff}"
    assert image_diff <= IMAGE_ATOL, f"decoded image differs from the reference by {image_diff}"
    # The PNG is SaveImage's floor(255 * image): within the tolerance of the reference's own floor.
    ref = ref_image.double().numpy() * 255
    lo, hi = np.floor(ref - 255 * IMAGE_ATOL), np.floor(ref + 255 * IMAGE_ATOL)
    assert np.all((png >= lo) & (png <= hi)), f"PNG off by up to {np.abs(png - np.floor(ref)).max()} levels"
