"""LoRAs on LTX-2's audio-video transformer (LoraLoaderModelOnly in the LTX-2.3 templates: the distilled LoRA at 0.5):
ltx2-tiny with its tiny LoRA (ComfyUI's key layout under `diffusion_model.`) gives upstream ComfyUI 0.10.0's
denoised video and audio at each strength (tests/models/fixtures/comfyui_ltx2_lora.json, recorded by
scripts/record_comfyui_ltx2_lora.py with comfy.sd.load_lora_for_models), and a LoRA for another model is refused
by name. Before, an LTX-2 model ignored its LoRAs."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from nodes.loaders import LoraLoaderModelOnly, make_ref
from nodes.models import loader
from nodes.models.errors import ModelLoadError
from nodes.models.ltx2 import pack, unpack
from nodes.sampling.model_sampling import model_sampling_from_config
from tests.recorded_tensors import load_json, tensor

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_ltx2_lora.json").read_text())
ATOL = 1e-5


@pytest.fixture
def base(demo_workspace):
    for name, digest in FIXTURE["sha256"].items():
        assert hashlib.sha256((demo_workspace.models_dir / name).read_bytes()).hexdigest() == digest, name
    return make_ref(
        "diffusion_model", "ltx2", [demo_workspace.models_dir / "checkpoints/ltx-2-19b-dev_tiny.safetensors"]
    )


def _denoise(model) -> tuple[torch.Tensor, torch.Tensor]:
    video, audio = tensor(FIXTURE["video"]), tensor(FIXTURE["audio"])
    shapes = [video.shape, audio.shape]
    cond = {"context": tensor(FIXTURE["context"]), "latent_shapes": shapes, "frame_rate": FIXTURE["frame_rate"]}
    sigma = torch.tensor([FIXTURE["sigma"]])
    ms = model_sampling_from_config(model.sampling)
    x = pack([video, audio])
    with torch.no_grad():
        out = ms.calculate_denoised(sigma, model.apply(ms.calculate_input(sigma, x), ms.timestep(sigma), cond), x)
    return tuple(unpack(out, shapes))


@pytest.mark.parametrize("index", range(len(FIXTURE["cases"])))
def test_lora_step_equals_comfyuis(base, index):
    torch.set_num_threads(1)
    case = FIXTURE["cases"][index]
    (patched,) = LoraLoaderModelOnly().load_lora_model_only(base, "ltx-2-19b-lora_tiny.safetensors", case["strength"])
    video, audio = _denoise(loader.load_diffusion_model(patched))
    torch.testing.assert_close(video, tensor(case["denoised_video"]), atol=ATOL, rtol=0)
    torch.testing.assert_close(audio, tensor(case["denoised_audio"]), atol=ATOL, rtol=0)
    plain_video, _ = _denoise(loader.load_diffusion_model(base))
    assert (plain_video - video).abs().max() > 1e-3  # the LoRA changed the step


ID_LORA = load_json(Path(__file__).parent / "fixtures" / "comfyui_ltx2_id_lora.json.xz")


@pytest.mark.parametrize("index", range(len(ID_LORA["cases"])))
def test_id_lora_layout_step_equals_comfyuis(base, demo_workspace, index):
    """The tiny LoRA in ID-LoRA's layout (PEFT's lora_A / lora_B without alpha on the audio attentions, the audio
    feed-forward and both cross-modal attentions; the LTX-2.3 ID-LoRA template's) gives 0.10.0's step too (recorded
    by scripts/record_comfyui_ltx2_lora.py with that file; the same seeded inputs as the other LoRA's)."""
    torch.set_num_threads(1)
    assert ID_LORA["video"] == FIXTURE["video"] and ID_LORA["context"] == FIXTURE["context"]  # the same inputs
    for name, digest in ID_LORA["sha256"].items():
        assert hashlib.sha256((demo_workspace.models_dir / name).read_bytes()).hexdigest() == digest, name
    case = ID_LORA["cases"][index]
    name = "ltx-2.3-id-lora-talkvid-3k_tiny.safetensors"
    (patched,) = LoraLoaderModelOnly().load_lora_model_only(base, name, case["strength"])
    video, audio = _denoise(loader.load_diffusion_model(patched))
    torch.testing.assert_close(video, tensor(case["denoised_video"]), atol=ATOL, rtol=0)
    torch.testing.assert_close(audio, tensor(case["denoised_audio"]), atol=ATOL, rtol=0)
    _, plain_audio = _denoise(loader.load_diffusion_model(base))
    assert (plain_audio - audio).abs().max() > 1e-3  # the LoRA changed the step


def test_a_lora_for_another_model_is_refused(base, demo_workspace):
    path = demo_workspace.models_dir / "loras" / "not-for-ltx2.safetensors"
    save_file(
        {
            "diffusion_model.double_blocks.0.img_attn.qkv.lora_A.weight": torch.zeros(4, 16),
            "diffusion_model.double_blocks.0.img_attn.qkv.lora_B.weight": torch.zeros(48, 4),
        },
        str(path),
    )
    try:
        (patched,) = LoraLoaderModelOnly().load_lora_model_only(base, path.name, 1.0)
        with pytest.raises(ModelLoadError, match="match no layer .*another architecture"):
            loader.load_diffusion_model(patched)
    finally:
        path.unlink()
