"""Record what ComfyUI 0.3.64 (a125cd84) computes with hunyuan-image-2.1-tiny, as the fixture our Hunyuan Image 2.1
support is tested on (tests/models/fixtures/comfyui_hunyuan_image.json.xz).

Run inside ComfyUI's own environment (it imports ComfyUI's modules; nothing of ComfyUI is copied here), after
`comfy-cluster demo-models` (or nodes.models.hunyuan_image_demo.build_demo_hunyuan_image) wrote the tiny files:

    cd <ComfyUI 0.3.64 source> && PYTHONPATH=<shim>:. OMP_NUM_THREADS=2 <ComfyUI venv>/bin/python \\
        /work/main/scripts/record_comfyui_hunyuan_image.py tests/models/fixtures/comfyui_hunyuan_image.json <models>

ComfyUI 0.3.64 reads the transformer's widths from the file (its heads are 128 wide) but fixes the 32x VAE's
(128..1024, two resnets per stage): so that its own classes load the tiny VAE, this script gives its Encoder and
Decoder the tiny file's stage widths and resnet count, and changes nothing else (comfy/sd.py's VAE: pixels 2x-1,
the posterior's mode, (x+1)/2 clamped; model detection, model_base.HunyuanImage21, its FLOW sampling at shift 5
and latent format are ComfyUI's).

Recorded: the transformer's raw output on seeded inputs (two latent sizes, a batch of two timesteps); the whole
model's denoised prediction with the latent format and model sampling; the VAE's decode and encode; and the
HunyuanRefinerLatent node's outputs. Inputs are seeded draws the test makes again (their sums are stored);
outputs above MAX_RECORDED_VALUES are kept as strided grids.
"""

from __future__ import annotations

import sys

import torch
from comfyui_recording import MAX_RECORDED_VALUES, b64, comfyui_on_cpu, sha256, write_json

OUT, MODELS = sys.argv[1:3]
comfyui_on_cpu()
import comfy.ldm.hunyuan_video.vae  # noqa: E402
import comfy.sd  # noqa: E402
import comfy.utils  # noqa: E402
import comfy_extras.nodes_hunyuan as nodes_hunyuan  # noqa: E402

COMMIT = "a125cd84b054a57729b5eecab930ca9408719832"
FILES = {
    "transformer": "diffusion_models/hunyuanimage2.1_tiny.safetensors",
    "vae": "vae/hunyuan_image_2.1_vae_tiny.safetensors",
}
TEXT_WIDTH = 32  # the tiny Qwen2.5-VL's (nodes.models.qwen_image_demo)


def tiny_vae_widths(vae_sd: dict) -> None:
    """Give ComfyUI's 32x VAE classes the tiny file's stage widths and resnets per stage."""
    stages = sorted({int(k.split(".")[2]) for k in vae_sd if k.startswith("encoder.down.")})
    widths = [vae_sd[f"encoder.down.{i}.block.0.conv1.weight"].shape[0] for i in stages]
    blocks = len({k.split(".")[4] for k in vae_sd if k.startswith("encoder.down.0.block.")})
    module = comfy.ldm.hunyuan_video.vae
    for name in ("Encoder", "Decoder"):
        cls = getattr(module, name)
        setattr(
            module,
            name,
            lambda cls=cls, **cfg: cls(**{**cfg, "block_out_channels": widths, "num_res_blocks": blocks}),
        )


def draws(seed: int, *shapes: list[int]) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=g) for s in shapes]


def record_transformer(patcher) -> list[dict]:
    net = patcher.model.diffusion_model
    cases = []
    for seed, shape, tokens, t in (
        (1, [1, 64, 3, 4], 7, [700.0]),
        (2, [2, 64, 2, 5], 5, [300.0, 900.0]),
    ):
        x, context = draws(seed, shape, [shape[0], tokens, TEXT_WIDTH])
        with torch.no_grad():
            out = net(x, torch.tensor(t), context)
        cases.append(
            {
                "seed": seed,
                "shape": shape,
                "tokens": tokens,
                "timesteps": t,
                "input_sum": float(x.sum() + context.sum()),
                "out": b64(out, MAX_RECORDED_VALUES),
            }
        )
    return cases


def record_denoised(patcher) -> dict:
    model = patcher.model
    x, context = draws(3, [1, 64, 3, 3], [1, 6, TEXT_WIDTH])
    with torch.no_grad():
        denoised = model.apply_model(x, torch.tensor([0.6]), c_crossattn=context)
    ms = patcher.get_model_object("model_sampling")
    sigmas = torch.tensor([1.0, 0.75, 0.5, 0.1, 0.01])
    return {
        "seed": 3,
        "shape": [1, 64, 3, 3],
        "tokens": 6,
        "sigma": 0.6,
        "input_sum": float(x.sum() + context.sum()),
        "denoised": b64(denoised),
        "process_in": b64(model.process_latent_in(x)),
        "process_out": b64(model.process_latent_out(x)),
        "sampling": {
            "class": type(ms).__name__,
            "sigma_max": float(ms.sigma_max),
            "sigma_min": float(ms.sigma_min),
            "sigmas": sigmas.tolist(),
            "timesteps": ms.timestep(sigmas).tolist(),
        },
    }


def record_vae(vae) -> dict:
    g = torch.Generator().manual_seed(5)
    latent = torch.randn([1, 64, 2, 3], generator=g)
    pixels = torch.rand([1, 70, 100, 3], generator=g)  # not multiples of 32: ComfyUI centre-crops
    return {
        "seed": 5,
        "latent_shape": [1, 64, 2, 3],
        "pixels_shape": [1, 70, 100, 3],
        "input_sum": float(latent.sum() + pixels.sum()),
        "decoded": b64(vae.decode(latent), MAX_RECORDED_VALUES),
        "encoded": b64(vae.encode(pixels)),
    }


def record_refiner_latent() -> list[dict]:
    cases = []
    for seed, shape, augmentation in ((6, [1, 64, 3, 4], 0.1), (7, [2, 32, 1, 3, 2], 0.35)):
        latent, cond = draws(seed, shape, [1, 4, 8])
        pos, neg, out = nodes_hunyuan.HunyuanRefinerLatent().execute(
            [[cond, {"pooled_output": None}]], [[cond * 2, {}]], {"samples": latent}, augmentation
        )
        cases.append(
            {
                "seed": seed,
                "shape": shape,
                "noise_augmentation": augmentation,
                "positive_keys": sorted(pos[0][1]),
                "negative_keys": sorted(neg[0][1]),
                "concat_is_latent": bool(torch.equal(pos[0][1]["concat_latent_image"], latent)),
                "augmentation_out": [pos[0][1]["noise_augmentation"], neg[0][1]["noise_augmentation"]],
                "latent_out_shape": list(out["samples"].shape),
                "latent_out_abs_sum": float(out["samples"].abs().sum()),
            }
        )
    return cases


def main() -> None:
    torch.set_num_threads(2)
    paths = {name: f"{MODELS}/{rel}" for name, rel in FILES.items()}
    tiny_vae_widths(comfy.utils.load_torch_file(paths["vae"]))
    patcher = comfy.sd.load_diffusion_model(paths["transformer"])
    vae = comfy.sd.VAE(sd=comfy.utils.load_torch_file(paths["vae"]))
    record = {
        "comfyui_commit": COMMIT,
        "files": {name: {"path": FILES[name], "sha256": sha256(p)} for name, p in paths.items()},
        "model_class": type(patcher.model).__name__,
        "unet_config": {
            k: v
            for k, v in patcher.model.model_config.unet_config.items()
            if isinstance(v, (bool, int, float, str, list))
        },
        "transformer": record_transformer(patcher),
        "denoised": record_denoised(patcher),
        "vae": record_vae(vae),
        "refiner_latent": record_refiner_latent(),
    }
    print(write_json(OUT, record))


if __name__ == "__main__":
    main()
