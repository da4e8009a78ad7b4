"""LTX-2.3 / 2.5's vocoder with bandwidth extension (nodes/models/ltx2_bwe_vocoder.py) in the tiny LTX-2.5 audio VAE
file (nodes/models/ltx25_audio_demo.py): equal to ComfyUI's own VocoderWithBWE run on the same file at development
time (scripts/record_comfyui_ltx25_audio_vae.py), the file decoding to 48 kHz stereo, unsupported vocoders named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from nodes.models.errors import ModelLoadError
from nodes.models.ltx2_audio import read_audio_vae, read_config
from nodes.models.ltx25_audio_demo import FILE, build
from scripts.comfyui_recording import sha256
from tests.recorded_tensors import tensor

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_ltx25_vocoder.json").read_text())


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("ltx25_audio"))


def test_equal_to_comfyuis_vocoder_with_bandwidth_extension(tiny: Path) -> None:
    torch.set_num_threads(1)
    assert tiny.as_posix().endswith(FILE)
    assert sha256(str(tiny)) == FIXTURE["file_sha256"]  # the numbers were recorded on this very file
    vae = read_audio_vae(str(tiny))
    for case in FIXTURE["cases"]:
        with torch.no_grad():
            waveform = vae.stages[1](tensor(case["mel"]))
        torch.testing.assert_close(waveform, tensor(case["waveform"]), rtol=0, atol=1e-5)


def test_the_file_decodes_to_48_khz_stereo(tiny: Path) -> None:
    torch.set_num_threads(1)
    assert read_config(str(tiny))["output_sample_rate"] == FIXTURE["output_sample_rate"] == 48000
    waveform = read_audio_vae(str(tiny)).decode(torch.randn(1, 8, 5, 16, generator=torch.Generator().manual_seed(0)))
    assert waveform.shape[:2] == (1, 2) and waveform.abs().max() > 1e-3


def test_an_unsupported_vocoder_is_named(tiny: Path, tmp_path: Path) -> None:
    with safe_open(str(tiny), "pt") as f:
        config = json.loads(f.metadata()["config"])
    config["vocoder"]["bwe"]["activation"] = "snake"
    path = tmp_path / "snake.safetensors"
    save_file(load_file(str(tiny)), str(path), metadata={"config": json.dumps(config)})
    with pytest.raises(ModelLoadError, match="AMP1 resblocks and SnakeBeta only"):
        read_audio_vae(str(path))
