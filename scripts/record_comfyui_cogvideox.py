"""Record what the newest ComfyUI's CogVideoX code computes on the tiny CogVideoX files (nodes/models/cogvideox_demo.py),
as tests/models/test_cogvideox.py checks (tests/models/fixtures/comfyui_cogvideox.json.xz).

CogVideoX is newer than every ComfyUI that runs here: the reference is the newest source's comfy/ldm/cogvideo/model.py
and vae.py, model_base.CogVideoX.concat_cond and model_sampling.V_PREDICTION_DDPM (comfyanonymous/ComfyUI, the
CogVideoX commit 5eeae3f1 as mirrored in yzkee/ComfyUI; the same code at 349c5aa265), kept outside the repository in
REF_DIR (cogvideo_model_ref.py, cogvideo_vae_ref.py, cogvideo_base_ref.py) and run on ComfyUI 0.10.0 (its ops,
attention, ModelSamplingDiscrete with zero terminal SNR, common_upscale). Nothing of ComfyUI is copied here. ComfyUI
fixes the VAE's released sizes and its detection reads the transformer's; here both are given the tiny files' sizes
(the transformer's as the newest model_detection rule reads them from the tensors). Run inside ComfyUI 0.10.0's
environment with models from `build_demo_cogvideox`:

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<shim>:<REF_DIR>:/work/main/scripts:. OMP_NUM_THREADS=1 \\
        <venv>/bin/python /work/main/scripts/record_comfyui_cogvideox.py \\
        /work/main/tests/models/fixtures/comfyui_cogvideox.json.xz <models dir>

Recorded: the model sampling (CogVideoX_T2V's linear 0.00085..0.012 betas, zsnr) sigmas and timesteps; the transformer
on seeded 16-channel latents with 32 seeded inpainting channels (3 frames, padded to 4 circularly; a batch of 2 at two timesteps) with seeded 32-wide
text states, raw and as V_PREDICTION_DDPM's denoised; concat_cond of a seeded 32-channel latent on a larger grid and
fewer frames; CLIPLoader type cogvideox's conditioning of two prompts (one weighted) with flux-tiny-t5 as T5-XXL;
the VAE's encode of 13 seeded frames (5 then 8) and its decode of 3 and 4 latent frames.
"""

from __future__ import annotations

import sys

import torch
from comfyui_recording import b64, comfyui_on_cpu, sha256, tiny_t5_in_comfyui, write_json

OUT, MODELS = sys.argv[1:3]
comfyui_on_cpu(flags=("--fp32-text-enc",))
import comfy.cli_args  # noqa: E402

comfy.cli_args.args.fp32_text_enc = True  # the T5 in float32, as ours computes (ComfyUI's CPU default is float16)
import cogvideo_base_ref as base  # noqa: E402  (the newest source, outside the repository)
import cogvideo_model_ref as model_ref  # noqa: E402
import cogvideo_vae_ref as vae_ref  # noqa: E402
import comfy.model_sampling  # noqa: E402
import comfy.ops  # noqa: E402
from safetensors.torch import load_file  # noqa: E402

DIT = "diffusion_models/void_pass1_tiny.safetensors"
VAE = "vae/cogvideox_vae_tiny.safetensors"
TEXT_ENCODER = "text_encoders/flux-tiny-t5.safetensors"
VOCAB = "/work/main/nodes/models/configs/flux-tiny/t5_vocab.json"
SAMPLING = {"linear_start": 0.00085, "linear_end": 0.012, "beta_schedule": "linear", "zsnr": True}


def seeded(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def dit_config(sd: dict) -> dict:
    """The newest model_detection's CogVideoX reading, and supported_models' 1.5 sample-size defaults."""
    norm1 = sd["blocks.0.norm1.linear.weight"]
    dim = norm1.shape[0] // 6
    config = {
        "num_attention_heads": dim // 64,
        "attention_head_dim": 64,
        "time_embed_dim": norm1.shape[1],
        "num_layers": 1 + max(int(k.split(".")[1]) for k in sd if k.startswith("blocks.")),
        "text_embed_dim": sd["patch_embed.text_proj.weight"].shape[1],
        "use_learned_positional_embeddings": False,
        "use_rotary_positional_embeddings": True,
    }
    w = sd["patch_embed.proj.weight"]
    assert w.ndim == 2
    config.update(patch_size=2, patch_size_t=2, in_channels=w.shape[1] // 8)
    config.update(sample_height=96, sample_width=170, sample_frames=81)
    return config


class Sampling(comfy.model_sampling.ModelSamplingDiscrete, base.V_PREDICTION_DDPM):
    pass


class Config:
    sampling_settings = SAMPLING


def main() -> None:
    torch.set_num_threads(1)
    sd = {k: v.float() for k, v in load_file(f"{MODELS}/{DIT}").items()}
    config = dit_config(sd)
    net = model_ref.CogVideoXTransformer3DModel(**config, dtype=torch.float32, operations=comfy.ops.disable_weight_init)
    net.load_state_dict(sd, strict=True)
    # the newest supported_models.CogVideoX_T2V: 0.7 from 48 heads, else the 2B format
    fmt = base.CogVideoX1_5() if config["num_attention_heads"] >= 48 else base.CogVideoX()
    ms = Sampling(Config())
    out = {
        "source": "comfyanonymous/ComfyUI 5eeae3f1 comfy/ldm/cogvideo (newest CogVideoX code) on ComfyUI 0.10.0",
        "files": {DIT: sha256(f"{MODELS}/{DIT}"), VAE: sha256(f"{MODELS}/{VAE}")},
        "config": config,
        "latent_scale": fmt.scale_factor,
        "sampling": {
            "count": len(ms.sigmas),
            "sigmas": b64(ms.sigmas[::111]),
            "timesteps": b64(ms.timestep(torch.tensor([0.05, 1.0, 30.0, float(ms.sigmas[-1])]))),
        },
    }
    cases = []
    for seed, shape, sigmas in ((1, (1, 16, 3, 4, 6), [2.5]), (2, (2, 16, 2, 4, 4), [40.0, 0.3])):
        x, context = seeded(seed, *shape), seeded(seed + 10, shape[0], 9, config["text_embed_dim"])
        concat = seeded(seed + 20, shape[0], 32, *shape[2:])  # the inpainting channels joined after the latent
        sigma = torch.tensor(sigmas)
        t = ms.timestep(sigma).float()
        with torch.no_grad():
            raw = net(torch.cat([ms.calculate_input(sigma, x), concat], dim=1), t, context)
        cases.append(
            {
                "seed": seed,
                "x": list(shape),
                "sigma": sigmas,
                "timestep": b64(t),
                "raw": b64(raw),
                "denoised": b64(ms.calculate_denoised(sigma, raw, x)),
            }
        )
    out["forward"] = cases

    class Holder:  # what concat_cond reads of its model
        diffusion_model = net
        latent_format = fmt

        def process_latent_in(self, latent):
            return fmt.process_in(latent)

    noise, image = seeded(5, 2, 16, 3, 4, 6), seeded(6, 1, 32, 2, 6, 8)
    out["concat"] = {
        "noise": [2, 16, 3, 4, 6],
        "image": [1, 32, 2, 6, 8],
        "out": b64(base.concat_cond(Holder(), noise=noise, concat_latent_image=image.clone(), device="cpu")),
    }
    vsd = load_file(f"{MODELS}/{VAE}")
    vae = vae_ref.AutoencoderKLCogVideoX(block_out_channels=(32, 32, 32, 32), latent_channels=16, layers_per_block=1)
    vae.load_state_dict(vsd, strict=True)
    pixels = torch.rand(13, 16, 24, 3, generator=torch.Generator().manual_seed(8))
    with torch.no_grad():
        # ComfyUI's VAE wrapper: [T,H,W,C] -> [1,C,T,H,W], 2x - 1 in; decode: (x + 1) / 2 clamped
        latent = vae.encode(pixels.movedim(-1, 0)[None] * 2.0 - 1.0)
        decoded = {
            str(n): b64(torch.clamp((vae.decode(seeded(20 + n, 1, 16, n, 2, 3)) + 1.0) / 2.0, 0.0, 1.0)) for n in (3, 4)
        }
    out["vae"] = {"encode": b64(latent), "decode": decoded}
    out["files"][TEXT_ENCODER] = sha256(f"{MODELS}/{TEXT_ENCODER}")
    out["text"] = record_text()
    write_json(OUT, out)


def record_text() -> list:
    """CLIPLoader type cogvideox (the newest comfy/text_encoders/cogvideo.py) built from ComfyUI 0.10.0's parts:
    SD3's T5-XXL tokenizer at min_length 226 inside an SD1 tokenizer named t5xxl, SD3's T5XXLModel inside an SD1 clip
    model named t5xxl, with the tiny T5 (comfyui_recording.tiny_t5_in_comfyui)."""
    import comfy.sd
    import comfy.sd1_clip
    import comfy.supported_models_base
    import comfy.text_encoders.sd3_clip as sd3_clip
    import comfy.utils

    tiny_t5_in_comfyui(f"{MODELS}/{TEXT_ENCODER}", VOCAB, sd3_clip)

    def inner(embedding_directory=None, tokenizer_data={}):  # noqa: B006  (ComfyUI's signature)
        return sd3_clip.T5XXLTokenizer(embedding_directory, tokenizer_data, min_length=226)

    class Tokenizer(comfy.sd1_clip.SD1Tokenizer):
        def __init__(self, embedding_directory=None, tokenizer_data={}):  # noqa: B006
            super().__init__(embedding_directory, tokenizer_data, clip_name="t5xxl", tokenizer=inner)

    class Model(comfy.sd1_clip.SD1ClipModel):
        def __init__(self, device="cpu", dtype=None, model_options={}):  # noqa: B006
            super().__init__(device, dtype, model_options, name="t5xxl", clip_model=sd3_clip.T5XXLModel)

    sd = comfy.utils.load_torch_file(f"{MODELS}/{TEXT_ENCODER}")
    target = comfy.supported_models_base.ClipTarget(Tokenizer, Model)
    clip = comfy.sd.CLIP(target, parameters=comfy.utils.calculate_parameters(sd), model_options={})
    clip.load_sd(sd)
    rows = []
    for text in ("Skateboard sliding down the snowy mountain view", "a (snowy:1.3) slope, [bright] sky"):
        tokens = clip.tokenize(text)
        ((cond, _extra),) = clip.encode_from_tokens_scheduled(tokens)
        rows.append({"prompt": text, "tokens": tokens["t5xxl"], "cond": b64(cond)})
    return rows


if __name__ == "__main__":
    main()
