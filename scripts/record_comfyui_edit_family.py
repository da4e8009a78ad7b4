"""Record what ComfyUI computes for RenormCFG (nodes_lumina2), Flux's reference latents (ReferenceLatent /
FluxKontextMultiReferenceLatentMethod, comfy/ldm/flux/model.py) and InstructPixToPixConditioning (nodes_ip2p),
as a fixture for tests/nodes/test_edit_family.py.

Run inside ComfyUI's own environment (it imports ComfyUI's modules and runs their code; nothing of ComfyUI
is copied here), given the demo models (`comfy-cluster demo-models` builds them):

    cd <ComfyUI source> && PYTHONPATH=<site>:. OMP_NUM_THREADS=2 <ComfyUI venv>/bin/python \\
        /work/main/scripts/record_comfyui_edit_family.py <models>/diffusion_models/flux-tiny.safetensors \\
        /work/main/tests/nodes/fixtures/comfyui_edit_family.json.xz <models>/checkpoints/sd1-tiny.safetensors

- RenormCFG: the node's function, captured from a stand-in MODEL, called with ComfyUI's argument dict on
  seeded tensors (batch of one, as ComfyUI's comparison needs) at sigmas above and below cfg_trunc.
- Flux: ComfyUI's Flux class built with the demo flux-tiny's hyperparameters and loaded with its weights
  (the file is in BFL's layout, ComfyUI's own), one forward pass with seeded inputs, without reference
  latents and with 1 or 3 of different sizes for each ref_latents_method (offset, index, uxo).
- An InstructPix2Pix UNet: ComfyUI's ldm UNet with 8 input channels on the demo SD1 weights (first convolution
  widened), one forward pass on the input joined with a concat latent.
- InstructPixToPixConditioning: the node with a stand-in VAE that records the pixels it is given and
  returns a fixed latent, so the pre-processing and the outputs' structure can be compared; and the
  InstructPix2Pix model's concat input (comfy.model_base.IP2P.concat_cond) for images of other sizes and
  batches. ReferenceLatent / FluxKontextMultiReferenceLatentMethod: the conditioning they return.
Tensors are stored as float32 (base64).
"""

from __future__ import annotations

import sys

import torch
from comfyui_recording import b64, comfyui_on_cpu, sha256, write_json

OUT = sys.argv[2]
WEIGHTS = sys.argv[1]
SD1_CHECKPOINT = sys.argv[3]
comfyui_on_cpu()
from comfy_extras import nodes_lumina2  # noqa: E402

COMFYUI = "0.3.64 (a125cd84b054a57729b5eecab930ca9408719832)"


def seeded(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


class Recorder:
    """Just enough of a ModelPatcher: records the cfg function RenormCFG registers."""

    def __init__(self, in_channels: int) -> None:
        self.model = type("M", (), {"diffusion_model": type("D", (), {"in_channels": in_channels})()})()
        self.fn = None

    def clone(self) -> Recorder:
        return self

    def set_model_sampler_cfg_function(self, fn, disable_cfg1_optimization=False) -> None:
        self.fn = fn


def renorm_cases() -> dict:
    x, cond, uncond = seeded(1, 1, 4, 6, 5), seeded(2, 1, 4, 6, 5), seeded(3, 1, 4, 6, 5)
    cases: dict = {"x": b64(x), "cond": b64(cond), "uncond": b64(uncond), "runs": []}
    for cfg_trunc, renorm, scale, sigma in (
        (100.0, 1.0, 5.0, 3.0),
        (100.0, 0.0, 5.0, 3.0),
        (2.0, 1.0, 5.0, 3.0),
        (100.0, 3.0, 2.0, 0.5),
        (100.0, 50.0, 7.0, 14.0),
    ):
        m = Recorder(4)
        nodes_lumina2.RenormCFG.execute(m, cfg_trunc, renorm)
        t = torch.tensor([sigma])
        out = m.fn(
            {
                "cond": x - cond,
                "uncond": x - uncond,
                "cond_scale": scale,
                "timestep": t,
                "input": x,
                "sigma": t,
                "cond_denoised": cond,
                "uncond_denoised": uncond,
                "model": None,
                "model_options": {},
            }
        )
        cases["runs"].append(
            {"cfg_trunc": cfg_trunc, "renorm_cfg": renorm, "cond_scale": scale, "sigma": sigma, "out": b64(x - out)}
        )
    return cases


def flux_cases(weights: str) -> dict:
    import comfy.ldm.flux.model
    import comfy.ops
    import comfy.utils

    sd = comfy.utils.load_torch_file(weights)
    model = comfy.ldm.flux.model.Flux(
        in_channels=16,
        out_channels=16,
        vec_in_dim=32,
        context_in_dim=32,
        hidden_size=32,
        mlp_ratio=4.0,
        num_heads=2,
        depth=1,
        depth_single_blocks=2,
        axes_dim=[4, 4, 8],
        theta=10000,
        patch_size=2,
        qkv_bias=True,
        guidance_embed=True,
        operations=comfy.ops.disable_weight_init,
    )
    missing, unexpected = model.load_state_dict(sd, strict=False)
    assert not missing and not unexpected, (missing, unexpected)
    x, context, y = seeded(10, 2, 16, 6, 8), seeded(11, 2, 5, 32), seeded(12, 2, 32)
    refs = [seeded(13, 1, 16, 6, 8), seeded(14, 1, 16, 4, 10), seeded(15, 1, 16, 5, 3)]
    t, guidance = torch.tensor([0.7, 0.7]), torch.tensor([3.5, 3.5])
    cases: dict = {
        "x": b64(x),
        "context": b64(context),
        "y": b64(y),
        "sigma": 0.7,
        "guidance": 3.5,
        "refs": [b64(r) for r in refs],
        "runs": [],
    }
    with torch.no_grad():
        cases["plain"] = b64(model(x, t, context, y, guidance))
        for method in ("offset", "index", "uxo"):
            for n in (1, 3):
                ref_latents = [r.repeat(2, 1, 1, 1) for r in refs[:n]]  # CONDList repeats to the batch
                out = model(x, t, context, y, guidance, ref_latents=ref_latents, ref_latents_method=method)
                cases["runs"].append({"method": method, "refs": n, "out": b64(out)})
    return cases


class RecordingVAE:
    """Stands in for ComfyUI's VAE: records the pixels it is asked to encode, returns a fixed latent."""

    def __init__(self) -> None:
        self.pixels = None

    def encode(self, pixels: torch.Tensor) -> torch.Tensor:
        self.pixels = pixels
        return seeded(21, pixels.shape[0], 4, pixels.shape[1] // 8, pixels.shape[2] // 8)


def node_cases() -> dict:
    from comfy_extras import nodes_edit_model, nodes_flux, nodes_ip2p

    cond = [[seeded(30, 1, 3, 8), {"pooled_output": seeded(31, 1, 8)}], [seeded(32, 1, 3, 8), {}]]
    a, b = seeded(33, 1, 16, 4, 4), seeded(34, 1, 16, 2, 6)
    once = nodes_edit_model.ReferenceLatent.execute(cond, {"samples": a}).result[0]
    twice = nodes_edit_model.ReferenceLatent.execute(once, {"samples": b}).result[0]
    untouched = nodes_edit_model.ReferenceLatent.execute(cond, None).result[0]
    methods = {
        m: nodes_flux.FluxKontextMultiReferenceLatentMethod.execute(twice, m).result[0][0][1][
            "reference_latents_method"
        ]
        for m in ("offset", "index", "uxo/uno")
    }
    cases: dict = {
        "reference_latent": {
            "refs_per_entry": [[len(e[1]["reference_latents"]) for e in out] for out in (once, twice)],
            "second_is_appended": bool(torch.equal(twice[0][1]["reference_latents"][1], b)),
            "without_latent_unchanged": untouched is cond,
            "methods": methods,
        },
        "ip2p": [],
    }
    for shape in ((1, 37, 45, 3), (2, 64, 40, 3)):
        vae, pixels = RecordingVAE(), torch.rand(*shape, generator=torch.Generator().manual_seed(40))
        pos, neg, latent = nodes_ip2p.InstructPixToPixConditioning.execute(cond, cond[:1], pixels, vae).result
        concat = pos[0][1]["concat_latent_image"]
        cases["ip2p"].append(
            {
                "image": b64(pixels),
                "encoded_pixels": b64(vae.pixels),
                "latent_samples": b64(latent["samples"]),
                "latent_keys": sorted(latent),
                "positive_keys": [sorted(e[1]) for e in pos],
                "negative_keys": [sorted(e[1]) for e in neg],
                "concat_is_the_encoding": all(e[1]["concat_latent_image"] is concat for e in pos + neg),
            }
        )
    # The InstructPix2Pix model's concat input (SD15_instructpix2pix's concat_cond: the IP2P mixin's rule).
    import comfy.model_base

    ip2p = type("IP2PRule", (comfy.model_base.IP2P,), {})()
    ip2p.process_ip2p_image_in = lambda image: image
    cases["ip2p_concat"] = []
    for image_shape, noise_shape in (
        ((1, 4, 16, 12), (3, 4, 8, 8)),
        ((5, 4, 8, 8), (2, 4, 8, 8)),
        ((2, 4, 6, 10), (7, 4, 6, 10)),
        (None, (2, 4, 8, 8)),
    ):
        image = None if image_shape is None else seeded(50, *image_shape)
        noise = seeded(51, *noise_shape)
        out = ip2p.concat_cond(concat_latent_image=image, noise=noise, device="cpu")
        cases["ip2p_concat"].append(
            {"image": None if image is None else b64(image), "noise": b64(noise), "out": b64(out)}
        )
    return cases


IP2P_SEED = 7  # the 4 extra input channels: 0.3 * randn from this seed (tests/e2e/test_edit_family_on_executors.py)


def ip2p_unet_case(checkpoint: str) -> dict:
    """ComfyUI's ldm UNet built for the demo SD1 model (as scripts/record_comfyui_model_patches.py builds it) with
    8 input channels, the demo weights with the first convolution widened, given the input joined with the
    concat latent as ComfyUI's apply_model joins c_concat."""
    import comfy.ops
    from comfy.ldm.modules.diffusionmodules.openaimodel import UNetModel
    from safetensors.torch import load_file

    prefix = "model.diffusion_model."
    weights = {k[len(prefix) :]: v for k, v in load_file(checkpoint).items() if k.startswith(prefix)}
    w = weights["input_blocks.0.0.weight"]
    extra = 0.3 * torch.randn(w.shape[0], 4, *w.shape[2:], generator=torch.Generator().manual_seed(IP2P_SEED))
    weights["input_blocks.0.0.weight"] = torch.cat([w, extra.to(w.dtype)], dim=1)
    net = UNetModel(
        image_size=32,
        in_channels=8,
        model_channels=32,
        out_channels=4,
        num_res_blocks=1,
        dropout=0,
        channel_mult=(1, 2),
        num_heads=8,
        use_spatial_transformer=True,
        transformer_depth=[1, 0],
        transformer_depth_middle=1,
        transformer_depth_output=[1, 1, 0, 0],
        context_dim=32,
        use_linear_in_transformer=False,
        dtype=torch.float32,
        device="cpu",
        operations=comfy.ops.disable_weight_init,
    )
    net.load_state_dict(weights, strict=True)
    x, concat, ctx = seeded(60, 2, 4, 8, 8), seeded(61, 2, 4, 8, 8), seeded(62, 2, 7, 32)
    t = torch.tensor([600.0, 600.0])
    with torch.no_grad():
        out = net(torch.cat([x, concat], dim=1), timesteps=t, context=ctx)
    return {
        "checkpoint_sha256": sha256(checkpoint),
        "seed": IP2P_SEED,
        "x": b64(x),
        "concat": b64(concat),
        "context": b64(ctx),
        "t": 600.0,
        "out": b64(out),
    }


def main() -> None:
    fixture = {
        "comfyui": COMFYUI,
        "recorded_by": "scripts/record_comfyui_edit_family.py",
        "renorm_cfg": renorm_cases(),
        "flux_reference_latents": flux_cases(WEIGHTS),
        "nodes": node_cases(),
        "ip2p_unet": ip2p_unet_case(SD1_CHECKPOINT),
    }
    write_json(OUT, fixture)


if __name__ == "__main__":
    main()
