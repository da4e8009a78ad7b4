"""Genmo Mochi 1 preview (nodes/models/mochi*.py) against ComfyUI 0.3.64 on the tiny files
(scripts/record_comfyui_mochi.py): detection and model sampling, CLIPLoader type mochi's conditioning and attention
mask, the raw DiT output and apply_model's prediction at sigma 0.7 with a 7-token prompt, and the VAE's decode
(whole and tiled) and encode."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch

from tests.recorded_tensors import at_recorded, load_json, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_mochi.json.xz")
DIT, VAE, T5 = list(FIXTURE["files"])
ATOL = 1e-5


REPO = Path(__file__).resolve().parents[2]


RECORDER = REPO / "scripts" / "record_comfyui_mochi.py"


def recorder_function(name: str):
    """One function of the recorder (tiny_lora, tiny_scaled_fp8), read from its source without running the
    recorder's ComfyUI set-up: the function's own code only."""
    import ast

    (node,) = [n for n in ast.parse(RECORDER.read_text()).body if isinstance(n, ast.FunctionDef) and n.name == name]
    namespace: dict = {"torch": torch}
    exec(compile(ast.Module([node], []), str(RECORDER), "exec"), namespace)
    return namespace[name]


def seeded(seed: int, shape) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def close(ours: torch.Tensor, entry: dict, atol: float = ATOL) -> None:
    torch.testing.assert_close(at_recorded(ours, entry), tensor(entry), atol=atol, rtol=0)


def test_files_are_the_recorded_ones(demo_workspace):
    for rel, digest in FIXTURE["files"].items():
        assert hashlib.sha256((demo_workspace.models_dir / rel).read_bytes()).hexdigest() == digest, rel


@pytest.fixture(scope="module")
def model(demo_workspace):
    from nodes.loaders import make_ref
    from nodes.models.loader import load_diffusion_model

    torch.set_num_threads(1)
    return load_diffusion_model(make_ref("diffusion_model", "mochi", [demo_workspace.models_dir / DIT]))


def test_detection_and_sampling_are_comfyuis(demo_workspace, model):
    from nodes.arch import is_video
    from nodes.models.detect import probe
    from nodes.sampling.model_sampling import model_sampling_from_config

    assert FIXTURE["model_config"] == "GenmoMochi" and FIXTURE["unet_dtype"] == "torch.float32"
    assert (probe(demo_workspace.models_dir / DIT).arch, probe(demo_workspace.models_dir / VAE).arch) == (
        "mochi",
        "mochi",
    )
    sizes, config = FIXTURE["dit_sizes"], model.module.config
    assert (config.depth, config.heads, config.hidden_x, config.hidden_y, config.t5_dim) == (
        sizes["depth"],
        sizes["num_heads"],
        sizes["hidden_size_x"],
        sizes["hidden_size_y"],
        sizes["t5_feat_dim"],
    )
    assert is_video("mochi") and model.latent_format.channels == 12
    ms = model_sampling_from_config(model.sampling)
    assert float(ms.sigmas[0]) == pytest.approx(FIXTURE["model_sampling"]["sigma_min"], abs=1e-7)
    assert len(ms.sigmas) == FIXTURE["model_sampling"]["count"]


def test_dit_output_and_prediction_are_comfyuis(model):
    from nodes.sampling.model_sampling import model_sampling_from_config

    rec = FIXTURE["forward"]
    x, context = seeded(*rec["x"]), seeded(*rec["context"])
    mask = torch.zeros(1, context.shape[1], dtype=torch.long)
    mask[:, : rec["tokens"]] = 1
    sigma = torch.tensor([rec["sigma"]])
    ms = model_sampling_from_config(model.sampling)
    with torch.no_grad():
        raw = model.apply(x, ms.timestep(sigma), {"context": context, "attention_mask": mask})
    close(raw, rec["raw"])
    close(ms.calculate_denoised(sigma, raw, x), rec["apply_model"])
    # the prompt's count matters: ComfyUI cuts the text tokens to it (a wrong cut changes the output)
    mask[:, rec["tokens"]] = 1
    with torch.no_grad():
        other = model.apply(x, ms.timestep(sigma), {"context": context, "attention_mask": mask})
    assert (at_recorded(other, rec["raw"]) - tensor(rec["raw"])).abs().max() > 1e-3


def test_lora_is_comfyuis(demo_workspace, model, tmp_path):
    """A LoRA at 0.8 in the three names ComfyUI 0.3.64 maps for Mochi (official bare, diffusion_model., kohya's
    lora_unet_ with an alpha): the prediction equals ComfyUI's with the same LoRA."""
    from safetensors.torch import save_file

    from cluster.refs import Patch
    from nodes.loaders import file_digest, make_ref
    from nodes.models.loader import load_diffusion_model
    from nodes.sampling.model_sampling import model_sampling_from_config

    lora = recorder_function("tiny_lora")()
    path = tmp_path / "mochi_lora.safetensors"
    save_file(lora, str(path))
    ref = make_ref("diffusion_model", "mochi", [demo_workspace.models_dir / DIT])
    patched = load_diffusion_model(ref.with_patch(Patch(str(path), file_digest(path), FIXTURE["lora"]["strength"])))
    rec = FIXTURE["forward"]
    x, context = seeded(*rec["x"]), seeded(*rec["context"])
    mask = torch.zeros(1, context.shape[1], dtype=torch.long)
    mask[:, : rec["tokens"]] = 1
    sigma = torch.tensor([rec["sigma"]])
    ms = model_sampling_from_config(patched.sampling)
    with torch.no_grad():
        raw = patched.apply(x, ms.timestep(sigma), {"context": context, "attention_mask": mask})
    close(ms.calculate_denoised(sigma, raw, x), FIXTURE["lora"]["apply_model"])
    assert (tensor(FIXTURE["lora"]["apply_model"]) - tensor(rec["apply_model"])).abs().max() > 1e-3


def test_scaled_fp8_file_is_comfyuis(demo_workspace, tmp_path):
    """The DiT as a scaled-fp8 file (every linear weight float8 over its scale_weight, the scaled_fp8 marker), as
    ComfyUI 0.3.64 computes it: the weights multiplied out, the biases rounded to fp8 (its fp8 layers)."""
    from safetensors.torch import load_file, save_file

    from nodes.loaders import make_ref
    from nodes.models.loader import load_diffusion_model
    from nodes.sampling.model_sampling import model_sampling_from_config

    assert FIXTURE["fp8"]["unet_dtype"] == "torch.float32"
    path = tmp_path / "mochi_preview_fp8_scaled_tiny.safetensors"
    save_file(recorder_function("tiny_scaled_fp8")(load_file(demo_workspace.models_dir / DIT)), str(path))
    fp8 = load_diffusion_model(make_ref("diffusion_model", "mochi", [path]))
    rec = FIXTURE["forward"]
    x, context = seeded(*rec["x"]), seeded(*rec["context"])
    mask = torch.zeros(1, context.shape[1], dtype=torch.long)
    mask[:, : rec["tokens"]] = 1
    sigma = torch.tensor([rec["sigma"]])
    ms = model_sampling_from_config(fp8.sampling)
    with torch.no_grad():
        raw = fp8.apply(x, ms.timestep(sigma), {"context": context, "attention_mask": mask})
    close(ms.calculate_denoised(sigma, raw, x), FIXTURE["fp8"]["apply_model"])
    assert (tensor(FIXTURE["fp8"]["apply_model"]) - tensor(rec["apply_model"])).abs().max() > 1e-3


def test_text_encoder_is_comfyuis(demo_workspace):
    from nodes.loaders import make_ref
    from nodes.models.loader import load_text_encoder

    ref = make_ref("text_encoder", "mochi", [demo_workspace.models_dir / T5], clip_type="mochi")
    encoder = load_text_encoder(ref)
    for rec in FIXTURE["text"]:
        tokens = encoder.tokenize(rec["prompt"])
        assert [[list(t) for t in w] for w in tokens["t5xxl"]] == rec["tokens"]
        cond, _ = encoder.encode(tokens)
        close(cond, rec["cond"])
        close(encoder.extras(tokens)["attention_mask"].float(), rec["attention_mask"], 0)


def test_vae_decode_is_comfyuis(demo_workspace):
    from nodes.loaders import make_ref
    from nodes.models.loader import load_vae

    vae = load_vae(make_ref("vae", "mochi", [demo_workspace.models_dir / VAE]))
    rec = FIXTURE["decode"]
    frames = vae.decode(seeded(rec["seed"], rec["shape"]))
    # ComfyUI's VAE.decode gives [B,T,H,W,3]; ours IMAGE [B*T,H,W,3]
    close(frames.reshape(rec["frames"]["shape"]), rec["frames"])


ENCODE = {"video": (5, 13, 50, 70), "one_frame": (6, 1, 32, 40)}  # the recorder's (seed, frames, height, width)


@pytest.mark.parametrize("case", sorted(ENCODE))
def test_vae_encode_is_comfyuis(demo_workspace, case):
    """VAEEncode: Fourier features, causal downsampling, temporal attention (one frame: its value path), the means;
    an odd size centre-cropped to a multiple of 8."""
    from nodes.loaders import make_ref
    from nodes.models.loader import load_vae

    vae = load_vae(make_ref("vae", "mochi", [demo_workspace.models_dir / VAE]))
    seed, frames, height, width = ENCODE[case]
    pixels = torch.rand(frames, height, width, 3, generator=torch.Generator().manual_seed(seed))
    close(vae.encode(pixels), FIXTURE["encode"][case])


def test_a_bare_decoder_file_decodes_and_refuses_to_encode(demo_workspace, tmp_path):
    """ComfyUI's other layout: the decoder alone, unprefixed; it decodes as the full file does."""
    from safetensors.torch import load_file, save_file

    from nodes.loaders import make_ref
    from nodes.models.detect import probe
    from nodes.models.loader import load_vae

    full = load_file(demo_workspace.models_dir / VAE)
    bare = tmp_path / "mochi_decoder.safetensors"
    save_file({k[len("decoder.") :]: v for k, v in full.items() if k.startswith("decoder.")}, str(bare))
    assert probe(bare).arch == "mochi"
    vae = load_vae(make_ref("vae", "mochi", [bare]))
    latent = seeded(3, (1, 12, 2, 2, 3))
    whole = load_vae(make_ref("vae", "mochi", [demo_workspace.models_dir / VAE]))
    assert torch.equal(vae.decode(latent), whole.decode(latent))
    with pytest.raises(ValueError, match="no encoder"):
        vae.encode(torch.zeros(7, 16, 16, 3))


def test_tiled_decode_is_comfyuis(demo_workspace):
    """VAE Decode (Tiled) in 2-frame latent tiles overlapping by 1 and 8x8 tiles overlapping by 2, blended as
    ComfyUI 0.3.64's VAEDecodeTiled blends them (nodes.modelfns.vae.tiled_video); not the whole decode."""
    import asyncio

    from nodes.loaders import make_ref
    from nodes.model_nodes import VAEDecodeTiled

    rec = FIXTURE["tiled"]
    ref = make_ref("vae", "mochi", [demo_workspace.models_dir / VAE])
    latent = seeded(rec["seed"], rec["shape"])
    (image,) = asyncio.run(VAEDecodeTiled().decode(ref, {"samples": latent}, *rec["settings"]))
    close(image.reshape(rec["image"]["shape"]), rec["image"])
    from nodes.models.loader import load_vae

    assert (image - load_vae(ref).decode(latent)).abs().max() > 1e-3
