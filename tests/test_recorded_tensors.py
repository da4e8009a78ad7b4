"""The recorders' tensor encoding (scripts/comfyui_recording.py) and the tests' decoding
(tests/recorded_tensors.py) agree: every fixture tensor reads back as the float32 values written, and a fixture file
written as .json.xz reads back as the data written, in the same bytes every time."""

from __future__ import annotations

import lzma
import sys
from pathlib import Path

import pytest
import torch

from tests.recorded_tensors import at_recorded, load_json, pixels, tensor

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from comfyui_recording import b64, png_rgb, write_json  # noqa: E402  (a script-folder module, imported by name as the recorders do)


def test_round_trip_keeps_values_shape_and_dtype():
    g = torch.Generator().manual_seed(0)
    cases = [
        torch.randn(2, 3, 5, generator=g),
        torch.randn(4, 6, generator=g).t(),  # not contiguous
        torch.randn(3, 7, generator=g).to(torch.bfloat16),  # stored as float32
        torch.randn(2, 2, generator=g, requires_grad=True),
        torch.zeros(0, 4),
        torch.tensor(1.5),
    ]
    for t in cases:
        back = tensor(b64(t))
        assert back.dtype == torch.float32 and back.shape == t.shape
        assert torch.equal(back, t.detach().float())


def test_a_thinned_output_reads_back_at_its_recorded_positions():
    """An output over max_values keeps a strided grid across every dimension; at_recorded picks ours there."""
    g = torch.Generator().manual_seed(1)
    t = torch.randn(3, 40, 50, 3, generator=g)
    entry = b64(t, max_values=1000)
    assert entry["shape"] == [3, 40, 50, 3] and len(tensor(entry).flatten()) <= 1000
    assert entry["stride"][-1] == 1 and max(entry["stride"]) > 1
    assert torch.equal(tensor(entry), at_recorded(t, entry))
    assert torch.equal(tensor(b64(t, max_values=t.numel())), t)  # at the bound: whole, no stride
    image = torch.rand(64, 48, 3, generator=g)
    png = png_rgb(image, max_values=500)
    ours = (255.0 * image).clamp(0, 255).to(torch.uint8).numpy()
    assert (pixels(png) == at_recorded(ours, png)).all()


def test_a_fixture_file_is_written_as_json_xz_in_the_same_bytes_and_read_back(tmp_path):
    data = {"f32": b64(torch.arange(6.0).reshape(2, 3)), "nan": float("nan"), "text": "é", "n": [1, 2.5, None]}
    (tmp_path / "a").mkdir()
    written = write_json(tmp_path / "a" / "comfyui_x.json", data)
    assert written == tmp_path / "a" / "comfyui_x.json.xz" and not (tmp_path / "a" / "comfyui_x.json").exists()
    again = write_json(tmp_path / "comfyui_x.json.xz", data)
    assert again.read_bytes() == written.read_bytes()  # deterministic: a re-recording that changes nothing is no diff
    assert lzma.LZMADecompressor().decompress(written.read_bytes())  # a plain .xz stream (xz -d reads it)
    for name in ("comfyui_x.json.xz", "comfyui_x.json"):  # named as it is, or as it was before compression
        back = load_json(tmp_path / "a" / name)
        assert back["n"] == data["n"] and back["text"] == "é" and back["nan"] != back["nan"]
        assert torch.equal(tensor(back["f32"]), torch.arange(6.0).reshape(2, 3))
    (tmp_path / "plain.json").write_text('{"a": 1}')
    assert load_json(tmp_path / "plain.json") == {"a": 1}


def test_fixture_files_refuse_other_names_and_a_stale_twin(tmp_path):
    with pytest.raises(ValueError, match="comfyui_x.txt"):
        write_json(tmp_path / "comfyui_x.txt", {})
    write_json(tmp_path / "comfyui_x.json", {"new": True})
    (tmp_path / "comfyui_x.json").write_text('{"old": true}')
    with pytest.raises(ValueError, match="both exist"):
        load_json(tmp_path / "comfyui_x.json")
    with pytest.raises(FileNotFoundError):
        load_json(tmp_path / "missing.json")
