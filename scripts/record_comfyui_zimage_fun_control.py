"""Record what ComfyUI 0.10.0 (upstream commit 79cdbc81) computes for Z-Image steered by alibaba-pai's Z-Image-Turbo
Fun ControlNet Union, on the tiny files of `comfy-cluster demo-models`, as the fixture
tests/nodes/fixtures/comfyui_zimage_fun_control.json.

Run inside that ComfyUI's own environment (nothing of ComfyUI is copied here):

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<sitecustomize shim>:. OMP_NUM_THREADS=1 <venv>/bin/python \\
        /work/main/scripts/record_comfyui_zimage_fun_control.py <fixture> <models dir>

ComfyUI fixes the released sizes (model detection takes a 3840-wide NextDiT for Z-Image; ZImage_Control's defaults
are 3840 wide with 30 heads; the autoencoder's base width); this script gives those classes the tiny sizes read from
the files and changes nothing else: ModelPatchLoader (its key tests and z_image_convert), QwenImageDiffsynthControlnet
and its ZImageControlPatch (VAE encoding, Flux latent scaling, the refiner and block hooks), the NextDiT are ComfyUI's.

The model: z-image-turbo-tiny made as deep as the released one where it matters (two noise and context refiner
blocks, so ComfyUI's hook counts its refiner steps as for the real model; eleven main blocks, so three of the six
control layers act, after blocks 0, 5 and 10): block i takes the tiny file's block i % (blocks in the file); the test
builds the same state dict (DEEPEN). Recorded per case: the control latent ComfyUI encoded (the patch's
encoded_image) and the NextDiT's output for a batch of two (two sigmas, two contexts), with the patches and without.
All in float32 on a CPU (ComfyUI's RoPE kernel takes no float64)."""

from __future__ import annotations

import json
import sys

import torch
from comfyui_recording import b64, comfyui_on_cpu, sha256

OUT, MODELS = sys.argv[1:3]
comfyui_on_cpu()
import comfy.ldm.lumina.controlnet as lumina_control  # noqa: E402
import comfy.ldm.lumina.model as lumina  # noqa: E402
import comfy.ldm.modules.diffusionmodules.model as ldm_vae  # noqa: E402
import comfy.model_patcher  # noqa: E402
import comfy.ops  # noqa: E402
import comfy.sd  # noqa: E402
import comfy.utils  # noqa: E402
import comfy_extras.nodes_model_patch as model_patch  # noqa: E402
import folder_paths  # noqa: E402

COMMIT = "79cdbc81"
TRANSFORMER = "diffusion_models/z-image-turbo-tiny.safetensors"
VAE = "vae/z-image-turbo-tiny-ae.safetensors"
PATCH = "model_patches/z_image_turbo_fun_controlnet_union_tiny.safetensors"
DEEPEN = {"layers": 11, "noise_refiner": 2, "context_refiner": 2}
HEAD = 128
# name -> (latent [H, W], control images' [H, W] with their strengths, one per chained patch)
CASES = {
    "no_patch": ([8, 8], []),
    "same_size": ([8, 8], [([64, 64], 0.8)]),
    "scaled_image": ([8, 8], [([40, 56], 1.0)]),
    "odd_latent": ([7, 9], [([56, 72], -0.6)]),
    "chained": ([8, 6], [([64, 48], 0.5), ([48, 40], 0.7)]),
}


def deepen(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The tiny transformer with DEEPEN's block counts, block i being the file's block i % (its count)."""
    out = {}
    for k, v in sd.items():
        name = k.split(".")[0]
        if name not in DEEPEN:
            out[k] = v
            continue
        have = len({key.split(".")[1] for key in sd if key.startswith(name + ".")})
        index, rest = int(k.split(".")[1]), ".".join(k.split(".")[2:])
        for i in range(index, DEEPEN[name], have):
            out[f"{name}.{i}.{rest}"] = v
    return out


def inputs(latent_hw: list[int], images: list[list[int]]) -> dict:
    """x, sigmas, context and control images, drawn from one generator in this order (the test draws them alike)."""
    g = torch.Generator().manual_seed(77)
    return {
        "x": torch.randn(2, 16, *latent_hw, generator=g),
        "sigma": torch.tensor([0.9, 0.4]),
        "context": torch.randn(2, 6, 32, generator=g),
        "images": [torch.rand(1, *hw, 3, generator=g) for hw in images],
    }


def tiny_model(sd: dict[str, torch.Tensor]) -> torch.nn.Module:
    dim, cap = sd["cap_embedder.1.weight"].shape
    net = lumina.NextDiT(
        patch_size=2,
        in_channels=16,
        dim=dim,
        n_layers=DEEPEN["layers"],
        n_refiner_layers=DEEPEN["noise_refiner"],
        n_heads=dim // HEAD,
        n_kv_heads=dim // HEAD,
        multiple_of=256,
        ffn_dim_multiplier=8.0 / 3.0,
        norm_eps=1e-5,
        qk_norm=True,
        cap_feat_dim=cap,
        # the rest as ComfyUI's model detection sets them for a 3840-wide Z-Image
        axes_dims=[32, 48, 48],
        axes_lens=[1536, 512, 512],
        rope_theta=256.0,
        z_image_modulation=True,
        time_scale=1000.0,
        pad_tokens_multiple=32 if "cap_pad_token" in sd else None,
        image_model="lumina2",
        dtype=torch.float32,
        operations=comfy.ops.disable_weight_init,
    )
    net.load_state_dict({k: v.float() for k, v in sd.items()})
    return net.eval()


def tiny_sizes(patch_sd: dict[str, torch.Tensor], vae_sd: dict[str, torch.Tensor]) -> None:
    """ZImage_Control and the autoencoder at the tiny files' sizes (ComfyUI's classes, other defaults)."""
    dim = patch_sd["control_all_x_embedder.2-1.weight"].shape[0]
    released = lumina_control.ZImage_Control

    class TinyControl(released):
        def __init__(self, **kw):
            super().__init__(dim=dim, n_heads=dim // HEAD, n_kv_heads=dim // HEAD, **kw)

    lumina_control.ZImage_Control = TinyControl
    vae_sizes = {
        "ch": vae_sd["encoder.conv_in.weight"].shape[0],
        "ch_mult": [1] * len({k.split(".")[2] for k in vae_sd if k.startswith("encoder.down.")}),
        "num_res_blocks": len({k.split(".")[4] for k in vae_sd if k.startswith("encoder.down.0.block.")}),
    }
    for name in ("Encoder", "Decoder"):
        cls = getattr(ldm_vae, name)
        setattr(ldm_vae, name, lambda cls=cls, **kw: cls(**{**kw, **vae_sizes}))


def main() -> None:
    torch.set_num_threads(1)
    folder_paths.add_model_folder_path("model_patches", f"{MODELS}/model_patches", is_default=True)
    patch_sd = comfy.utils.load_torch_file(f"{MODELS}/{PATCH}")
    vae_sd = comfy.utils.load_torch_file(f"{MODELS}/{VAE}")
    tiny_sizes(patch_sd, vae_sd)
    net = tiny_model(deepen(comfy.utils.load_torch_file(f"{MODELS}/{TRANSFORMER}")))
    vae = comfy.sd.VAE(sd=vae_sd)
    (patch,) = model_patch.ModelPatchLoader().load_model_patch(PATCH.split("/", 1)[1])
    out = {
        "comfyui_commit": COMMIT,
        "recorded_by": "scripts/record_comfyui_zimage_fun_control.py",
        "files": {p: sha256(f"{MODELS}/{p}") for p in (TRANSFORMER, VAE, PATCH)},
        "deepen": DEEPEN,
        "cases": {},
    }
    for name, (latent_hw, controls) in CASES.items():
        record(out, name, latent_hw, controls, net, patch, vae)
    with open(OUT, "w") as f:
        f.write(json.dumps(out) + "\n")


@torch.inference_mode()  # as ComfyUI's executor runs nodes
def record(out: dict, name: str, latent_hw: list[int], controls: list, net, patch, vae) -> None:
    t = inputs(latent_hw, [hw for hw, _ in controls])
    model = comfy.model_patcher.ModelPatcher(net, torch.device("cpu"), torch.device("cpu"))
    for image, (_, strength) in zip(t["images"], controls):
        (model,) = model_patch.QwenImageDiffsynthControlnet().diffsynth_controlnet(model, patch, vae, image, strength)
    transformer_options = dict(model.model_options.get("transformer_options", {}))
    y = net(t["x"], t["sigma"], t["context"], t["context"].shape[1], transformer_options=transformer_options)
    patches = transformer_options.get("patches", {}).get("double_block", [])
    out["cases"][name] = {
        "latent_hw": latent_hw,
        "controls": [{"image_hw": hw, "strength": s} for hw, s in controls],
        "input_sums": {k: float(v.double().sum()) for k, v in t.items() if k != "images"}
        | {f"image{i}": float(im.double().sum()) for i, im in enumerate(t["images"])},
        "encoded": [b64(p.encoded_image) for p in patches],
        "output": b64(y),
        "plain": b64(net(t["x"], t["sigma"], t["context"], t["context"].shape[1])),
    }
    print(name, [tuple(p.encoded_image.shape) for p in patches], float(y.abs().mean()))


if __name__ == "__main__":
    main()
