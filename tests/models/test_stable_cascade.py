"""Stable Cascade (nodes/models/stable_cascade.py, stable_cascade_text.py, stable_cascade_vae.py): detection from the
published key layout, CLIP-G as ComfyUI runs it for Stable Cascade, the stage C and stage B networks and stage A,
equal to ComfyUI 0.3.64 on the tiny files within 1e-5 (tests/models/fixtures/comfyui_stable_cascade.json, recorded
by scripts/record_comfyui_stable_cascade.py)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch

from tests.node_calls import active_workspace
from tests.recorded_tensors import tensor

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_stable_cascade.json").read_text())
STAGE_C = "checkpoints/stable_cascade_stage_c-tiny.safetensors"
STAGE_B = "checkpoints/stable_cascade_stage_b-tiny.safetensors"
STAGE_C_UNET = "diffusion_models/stable_cascade_stage_c-tiny.safetensors"


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    from nodes.models.stable_cascade_demo import build_demo_stable_cascade

    yield from active_workspace(tmp_path_factory.mktemp("cascade"), build_demo_stable_cascade)


def ref(ws, component: str, rel: str, arch: str = "stable_cascade_c"):
    from nodes.loaders import make_ref

    return make_ref(component, arch, [ws.models_dir / rel])


def seeded(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def test_fixture_was_recorded_on_these_files(ws) -> None:
    for rel, digest in FIXTURE["files"].items():
        assert hashlib.sha256((ws.models_dir / rel).read_bytes()).hexdigest() == digest, rel


def test_detection_follows_the_published_keys(ws) -> None:
    from nodes.models.detect import probe

    c = probe(ws.models_dir / STAGE_C)
    assert (c.arch, c.kind, c.prefix) == ("stable_cascade_c", "checkpoint", "model.diffusion_model.")
    assert c.components == {"diffusion_model", "text_encoder", "vae"}
    b = probe(ws.models_dir / STAGE_B)
    assert (b.arch, b.kind, b.components) == ("stable_cascade_b", "checkpoint", {"diffusion_model", "vae"})
    bare = probe(ws.models_dir / STAGE_C_UNET)
    assert (bare.arch, bare.kind, bare.prefix) == ("stable_cascade_c", "diffusion_model", "")


def test_text_encoder_equals_comfyui(ws) -> None:
    from nodes.models.loader import load_text_encoder

    torch.set_num_threads(1)
    te = load_text_encoder(ref(ws, "text_encoder", STAGE_C))
    for rec in FIXTURE["text"]:
        cond, pooled = te.encode(te.tokenize(rec["prompt"]))
        torch.testing.assert_close(cond, tensor(rec["cond"]), rtol=0, atol=1e-5)
        torch.testing.assert_close(pooled, tensor(rec["pooled"]), rtol=0, atol=1e-5)


def _denoised(model, x: torch.Tensor, sigmas: list[float], cond: dict) -> torch.Tensor:
    """ComfyUI's apply_model: the eps network on the scaled input at the schedule's timestep, as a denoised latent."""
    from nodes.sampling.model_sampling import model_sampling_from_config

    ms = model_sampling_from_config(model.sampling)
    sigma = torch.tensor(sigmas)
    s = sigma.reshape(-1, 1, 1, 1)
    with torch.no_grad():
        out = model.apply(ms.calculate_input(s, x), ms.timestep(sigma), cond)
    return ms.calculate_denoised(s, out, x)


@pytest.mark.parametrize("rel", [STAGE_C, STAGE_C_UNET])
def test_stage_c_equals_comfyui(ws, rel) -> None:
    from nodes.models.loader import load_diffusion_model

    torch.set_num_threads(1)
    model = load_diffusion_model(ref(ws, "diffusion_model", rel))
    rec = FIXTURE["text"][0]
    cond = {"context": tensor(rec["cond"]), "pooled": tensor(rec["pooled"])}
    for case in FIXTURE["stage_c"].values():
        ours = _denoised(model, seeded(case["seed"], *case["shape"]), case["sigmas"], cond)
        torch.testing.assert_close(ours, tensor(case["denoised"]), rtol=0, atol=1e-5)


def test_stage_b_equals_comfyui(ws) -> None:
    from nodes.models.loader import load_diffusion_model

    torch.set_num_threads(1)
    model = load_diffusion_model(ref(ws, "diffusion_model", STAGE_B, "stable_cascade_b"))
    pooled = tensor(FIXTURE["text"][0]["pooled"])
    for case in FIXTURE["stage_b"].values():
        cond = {"pooled": pooled, "stable_cascade_prior": seeded(case["seed"] + 100, 1, 16, 3, 4)}
        ours = _denoised(model, seeded(case["seed"], *case["shape"]), case["sigmas"], cond)
        torch.testing.assert_close(ours, tensor(case["denoised"]), rtol=0, atol=1e-5)


def test_stage_a_decodes_as_comfyui(ws) -> None:
    from nodes.models.loader import load_vae

    torch.set_num_threads(1)
    vae = load_vae(ref(ws, "vae", STAGE_B, "stable_cascade_b"))
    rec = FIXTURE["stage_a"]
    torch.testing.assert_close(vae.decode(seeded(rec["seed"], *rec["shape"])), tensor(rec["image"]), rtol=0, atol=1e-5)


def test_stage_c_encode_equals_comfyuis(ws) -> None:
    import asyncio

    from tests.node_calls import call_node

    torch.set_num_threads(1)
    rec = FIXTURE["stage_c_encode"]
    image = torch.rand(rec["shape"], generator=torch.Generator().manual_seed(rec["seed"]))
    vae = ref(ws, "vae", STAGE_C)
    c, b = asyncio.run(
        call_node("StableCascade_StageC_VAEEncode", image=image, vae=vae, compression=rec["compression"])
    )
    torch.testing.assert_close(c["samples"], tensor(rec["stage_c"]), rtol=0, atol=1e-5)
    assert list(b["samples"].shape) == rec["stage_b"] and not b["samples"].any()


def test_previewer_decodes_as_comfyui(ws) -> None:
    from nodes.models.loader import load_vae

    torch.set_num_threads(1)
    vae = load_vae(ref(ws, "vae", STAGE_C))
    rec = FIXTURE["previewer"]
    torch.testing.assert_close(vae.decode(seeded(rec["seed"], *rec["shape"])), tensor(rec["image"]), rtol=0, atol=1e-5)


def test_stage_c_coder_files_alone(ws, tmp_path) -> None:
    """The effnet and previewer files ComfyUI's comfy/sd.py reads beside the combined one: each holds its half."""
    from safetensors.torch import load_file, save_file

    from nodes.models.detect import probe
    from nodes.models.loader import load_vae

    sd = load_file(ws.models_dir / STAGE_C)
    for half in ("encoder", "previewer"):
        path = tmp_path / f"{half}.safetensors"
        save_file({k[len(f"vae.{half}.") :]: v for k, v in sd.items() if k.startswith(f"vae.{half}.")}, str(path))
        assert (probe(path).arch, probe(path).kind) == ("stable_cascade_c", "vae")
        vae = load_vae(ref(ws, "vae", str(path)))
        other = "decode" if half == "encoder" else "encode"
        with pytest.raises(ValueError, match="lacks those weights"):
            getattr(vae, other)(torch.zeros(1, 16, 2, 2) if other == "decode" else torch.zeros(1, 64, 64, 3))


def test_super_resolution_controlnet_inputs_equal_comfyuis(ws) -> None:
    import asyncio

    from tests.node_calls import call_node

    torch.set_num_threads(1)
    rec = FIXTURE["super_resolution"]
    image = torch.rand(rec["shape"], generator=torch.Generator().manual_seed(rec["seed"]))
    vae = ref(ws, "vae", STAGE_B, "stable_cascade_b")
    cn, c, b = asyncio.run(call_node("StableCascade_SuperResolutionControlnet", image=image, vae=vae))
    torch.testing.assert_close(cn, tensor(rec["controlnet_input"]), rtol=0, atol=1e-5)
    assert (list(c["samples"].shape), list(b["samples"].shape)) == (rec["stage_c"], rec["stage_b"])
    assert not c["samples"].any() and not b["samples"].any()


def test_separate_files_through_the_loader_nodes_equal_comfyui(ws, tmp_path) -> None:
    """ComfyUI's other way to load Stable Cascade: CLIPLoader type stable_cascade on a bare CLIP-G file (transformers'
    names, as the published text_encoder/model.safetensors) and VAELoader on a bare stage A file give the
    checkpoints' numbers."""
    import asyncio

    from safetensors.torch import load_file, save_file

    from nodes.models.loader import load_text_encoder, load_vae
    from tests.node_calls import call_node

    torch.set_num_threads(1)
    c = load_file(ws.models_dir / STAGE_C)
    te = "text_encoder.clip_g.transformer."
    save_file({k[len(te) :]: v for k, v in c.items() if k.startswith(te)}, str(ws.models_dir / "text_encoders/g.sft"))
    b = load_file(ws.models_dir / STAGE_B)
    save_file({k[4:]: v for k, v in b.items() if k.startswith("vae.")}, str(ws.models_dir / "vae/stage_a.safetensors"))
    (clip,) = asyncio.run(call_node("CLIPLoader", clip_name="g.sft", type="stable_cascade"))
    encoder = load_text_encoder(clip)
    for rec in FIXTURE["text"]:
        cond, pooled = encoder.encode(encoder.tokenize(rec["prompt"]))
        torch.testing.assert_close(cond, tensor(rec["cond"]), rtol=0, atol=1e-5)
        torch.testing.assert_close(pooled, tensor(rec["pooled"]), rtol=0, atol=1e-5)
    (vae,) = asyncio.run(call_node("VAELoader", vae_name="stage_a.safetensors"))
    rec = FIXTURE["stage_a"]
    decoded = load_vae(vae).decode(seeded(rec["seed"], *rec["shape"]))
    torch.testing.assert_close(decoded, tensor(rec["image"]), rtol=0, atol=1e-5)


def _unclip_images() -> list[tuple[torch.Tensor, float]]:
    return [(seeded(i["seed"], 1, 768), i["strength"]) for i in FIXTURE["stage_c_unclip"]["images"]]


def test_stage_c_reads_unclip_images_as_comfyui(ws) -> None:
    from nodes.models.loader import load_diffusion_model

    torch.set_num_threads(1)
    model = load_diffusion_model(ref(ws, "diffusion_model", STAGE_C))
    rec, text = FIXTURE["stage_c_unclip"], FIXTURE["text"][0]
    clip_img = torch.cat([e.unsqueeze(0) * w for e, w in _unclip_images()], dim=1)
    cond = {"context": tensor(text["cond"]), "pooled": tensor(text["pooled"]), "clip_img": clip_img}
    ours = _denoised(model, seeded(rec["seed"], *rec["shape"]), rec["sigmas"], cond)
    torch.testing.assert_close(ours, tensor(rec["denoised"]), rtol=0, atol=1e-5)


def test_unclip_conditioning_through_the_ksampler_equals_comfyuis(ws) -> None:
    """unCLIPConditioning's images reach stage C through the sampling loop (a negative prompt without images gets
    ComfyUI's zero token)."""
    import asyncio

    from nodes.library.clip_vision import ClipVisionOutput
    from tests.node_calls import call_node

    torch.set_num_threads(1)
    rec = FIXTURE["stage_c_unclip"]["ksampler"]
    model = ref(ws, "diffusion_model", STAGE_C)
    text, empty = FIXTURE["text"][0], FIXTURE["text"][1]
    positive = [[tensor(text["cond"]), {"pooled_output": tensor(text["pooled"])}]]
    for embeds, strength in _unclip_images():
        vision = ClipVisionOutput(embeds, embeds, embeds)
        (positive,) = asyncio.run(
            call_node(
                "unCLIPConditioning",
                conditioning=positive,
                clip_vision_output=vision,
                strength=strength,
                noise_augmentation=0.0,
            )
        )
    negative = [[tensor(empty["cond"]), {"pooled_output": tensor(empty["pooled"])}]]
    (out,) = asyncio.run(
        call_node(
            "KSampler",
            model=model,
            seed=rec["seed"],
            steps=rec["steps"],
            cfg=rec["cfg"],
            sampler_name="euler",
            scheduler="simple",
            positive=positive,
            negative=negative,
            latent_image={"samples": torch.zeros(1, 16, 3, 4)},
            denoise=1.0,
        )
    )
    expected = tensor(rec["samples"])
    torch.testing.assert_close(out["samples"], expected, rtol=0, atol=1e-5 * max(1.0, float(expected.abs().max())))


def test_a_stable_cascade_controlnet_is_refused_by_name(tmp_path) -> None:
    """Its EfficientNet backbone has the stage C coder's keys; it is told apart by its projections, and refused."""
    from safetensors.torch import save_file

    from nodes.models.detect import probe
    from nodes.models.errors import ModelLoadError

    path = tmp_path / "super_resolution.safetensors"
    tensors = {
        "backbone.0.0.weight": torch.zeros(8, 3, 3, 3),
        "backbone.1.0.block.0.1.num_batches_tracked": torch.tensor(0),
        "projections.0.0.weight": torch.zeros(4, 4, 1, 1),
    }
    save_file(tensors, str(path))
    with pytest.raises(ModelLoadError, match="Stable Cascade ControlNet"):
        probe(path)
