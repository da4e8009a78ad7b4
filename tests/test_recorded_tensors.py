"""The recorders' tensor encoding (scripts/comfyui_recording.py) and the tests' decoding
(tests/recorded_tensors.py) agree: every fixture tensor reads back as the float32 values written."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from tests.recorded_tensors import at_recorded, pixels, tensor

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from comfyui_recording import b64, png_rgb  # noqa: E402  (a script-folder module, imported by name as the recorders do)


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
