"""Record what upstream ComfyUI 0.10.0 (commit 79cdbc81 of hiddenswitch/ComfyUI) computes with kandinsky5-tiny's
video DiT, as the fixture our Kandinsky 5 support is tested on (tests/models/fixtures/comfyui_kandinsky5.json.xz).

Run inside that ComfyUI's own environment (it imports ComfyUI's modules; nothing of ComfyUI is copied here), after
nodes.models.kandinsky5_demo.build_demo_kandinsky5 (or `comfy-cluster demo-models`) wrote the tiny file:

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim>:. OMP_NUM_THREADS=1 <venv>/bin/python \\
        /work/main/scripts/record_comfyui_kandinsky5.py tests/models/fixtures/comfyui_kandinsky5.json <models>

ComfyUI's model_detection reads the file whole except its text widths: supported_models.Kandinsky5 leaves the
Qwen2.5-VL (3584) and CLIP-L (768) widths at their defaults, so this script gives its unet_config the tiny file's
(32 and 32) and changes nothing else (detection, model_base.Kandinsky5's concat_cond and extra_conds, the FLOW
sampling at shift 10 and the HunyuanVideo latent format are ComfyUI's).

Recorded: the diffusion model's raw output on seeded inputs (a batch of two timesteps; again with clean start frames
written over the input by time_dim_replace), and the whole model's prediction (apply_model at one sigma) from the
conditioning Kandinsky5ImageToVideo gives (time_dim_replace and concat_mask). Inputs are seeded draws the test makes
again (their sums are stored).
"""

from __future__ import annotations

import sys

import torch
from comfyui_recording import MAX_RECORDED_VALUES, b64, comfyui_on_cpu, sha256, write_json

OUT, MODELS = sys.argv[1:3]
comfyui_on_cpu()
import comfy.ldm.wan.vae  # noqa: E402
import comfy.sd  # noqa: E402
import comfy.supported_models  # noqa: E402
import comfy.utils  # noqa: E402
import comfy_extras.nodes_kandinsky5 as nodes_kandinsky5  # noqa: E402

COMMIT = "79cdbc81"
FILE = "diffusion_models/kandinsky5lite_t2v_tiny.safetensors"
# The video models' VAE is HunyuanVideo's (not implemented here yet); the nodes take any VAE, and the Wan 2.1 VAE's
# latent has the same shape (16 channels, 4x frames, 8x size): the image-to-video node is recorded with its tiny file.
VAE = "vae/wan_2.1_vae_tiny.safetensors"
# (width, height, length, batch_size, start frames or None): start frames are seeded draws of this size
I2V_CASES = {
    "text_only": (64, 48, 9, 2, None),
    "one_frame": (64, 48, 9, 1, (1, 40, 56)),
    "five_frames": (32, 32, 13, 1, (6, 32, 48)),
}
# (latent shape, start_frame_count, reference_frame_count)
NORMALIZE_CASES = {
    "default": ((1, 16, 9, 4, 6), 4, 5),
    "short": ((2, 16, 3, 4, 6), 2, 5),
    "one_frame": ((1, 16, 1, 4, 6), 4, 5),
}
TEXT_WIDTH, POOLED_WIDTH = 32, 32  # the tiny Qwen2.5-VL's and flux-tiny's CLIP-L


def inputs(seed: int) -> dict[str, torch.Tensor]:
    """What the test draws again: the noisy latent with its joined channels, text states and pooled vector."""
    g = torch.Generator().manual_seed(seed)
    return {
        "x": torch.randn(2, 33, 3, 8, 12, generator=g),
        "context": torch.randn(2, 7, TEXT_WIDTH, generator=g),
        "y": torch.randn(2, POOLED_WIDTH, generator=g),
        "start": torch.randn(1, 16, 1, 8, 12, generator=g),
        "mask": (torch.rand(1, 1, 3, 8, 12, generator=g) > 0.5).float(),
    }


def main() -> None:
    torch.set_num_threads(1)
    comfy.supported_models.Kandinsky5.unet_extra_config = {"in_text_dim": TEXT_WIDTH, "in_text_dim2": POOLED_WIDTH}
    path = f"{MODELS}/{FILE}"
    sd = comfy.utils.load_torch_file(path)
    patcher = comfy.sd.load_diffusion_model_state_dict(sd, model_options={"dtype": torch.float32})
    model = patcher.model
    print(type(model).__name__, model.model_config.unet_config, file=sys.stderr)
    dit = model.diffusion_model
    data = inputs(39)
    t = torch.tensor([937.5, 250.0])
    with torch.no_grad():
        raw = dit(data["x"], t, data["context"], data["y"])
        start = data["start"].expand(2, -1, -1, -1, -1)
        replaced = dit(data["x"], t, data["context"], data["y"], time_dim_replace=start)
        noise = data["x"][:, :16]
        conds = model.extra_conds(
            noise=noise,
            device=torch.device("cpu"),
            pooled_output=data["y"],
            cross_attn=data["context"],
            time_dim_replace=data["start"],
            concat_mask=data["mask"],
        )
        kwargs = {k: v.process_cond(batch_size=2, area=None, device=torch.device("cpu")).cond for k, v in conds.items()}
        sigma = torch.tensor([0.8, 0.8])
        denoised = model.apply_model(noise, sigma, **kwargs)
    data_nodes = record_nodes()
    write_json(
        OUT,
        {
            "comfyui_commit": COMMIT,
            "file": FILE,
            "file_sha256": sha256(path),
            "unet_config": {
                k: list(v) if isinstance(v, tuple) else v
                for k, v in model.model_config.unet_config.items()
                if k != "dtype"
            },
            "model_class": type(model).__name__,
            "shift": float(model.model_sampling.shift),
            "input_sums": {k: float(v.sum()) for k, v in data.items()},
            "timesteps": t.tolist(),
            "raw": b64(raw, MAX_RECORDED_VALUES),
            "time_dim_replace": b64(replaced, MAX_RECORDED_VALUES),
            "sigma": 0.8,
            "denoised": b64(denoised, MAX_RECORDED_VALUES),
            "concat": b64(kwargs["c_concat"], MAX_RECORDED_VALUES),
            **data_nodes,
        },
    )


def cond_values(conditioning: list) -> dict:
    opts = conditioning[0][1]
    return {k: b64(opts[k]) for k in ("time_dim_replace", "concat_mask") if k in opts}


def record_nodes() -> dict:
    """The two nodes' interfaces and outputs: Kandinsky5ImageToVideo without and with start frames (the tiny Wan 2.1
    VAE, its base width read from the file), NormalizeVideoLatentStart on seeded latents."""
    vae_sd = comfy.utils.load_torch_file(f"{MODELS}/{VAE}")
    wan = comfy.ldm.wan.vae.WanVAE  # ComfyUI fixes the Wan VAE's base width (96); the tiny file's is narrower
    comfy.ldm.wan.vae.WanVAE = lambda **cfg: wan(**{**cfg, "dim": vae_sd["encoder.conv1.weight"].shape[0]})
    vae = comfy.sd.VAE(sd=vae_sd)
    cond = [[torch.ones(1, 3, 4), {"pooled_output": torch.zeros(1, 4)}]]
    i2v = {}
    for name, (width, height, length, batch, start) in I2V_CASES.items():
        args = {"positive": cond, "negative": cond, "vae": vae, "width": width, "height": height, "length": length}
        args["batch_size"] = batch
        if start is not None:
            args["start_image"] = torch.rand(*start, 3, generator=torch.Generator().manual_seed(7))
        pos, neg, latent, cond_latent = nodes_kandinsky5.Kandinsky5ImageToVideo.execute(**args).result
        i2v[name] = {
            "latent_shape": list(latent["samples"].shape),
            "latent_sum": float(latent["samples"].sum()),
            "cond_latent": b64(cond_latent["samples"]) if cond_latent else None,
            "positive": cond_values(pos),
            "negative": cond_values(neg),
        }
    normalize = {}
    for name, (shape, start, reference) in NORMALIZE_CASES.items():
        samples = torch.randn(*shape, generator=torch.Generator().manual_seed(3)) * 2 + 0.5
        (out,) = nodes_kandinsky5.NormalizeVideoLatentStart.execute({"samples": samples}, start, reference).result
        normalize[name] = b64(out["samples"])
    info = {}
    for cls in (nodes_kandinsky5.Kandinsky5ImageToVideo, nodes_kandinsky5.NormalizeVideoLatentStart):
        node = cls.GET_NODE_INFO_V1()
        info[node["name"]] = {**node, "python_module": "comfy_extras.nodes_kandinsky5"}
    return {
        "vae": VAE,
        "vae_sha256": sha256(f"{MODELS}/{VAE}"),
        "image_to_video": i2v,
        "normalize": normalize,
        "object_info": info,
    }


if __name__ == "__main__":
    main()
