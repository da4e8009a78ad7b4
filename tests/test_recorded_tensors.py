"""The recorders' tensor encoding (scripts/comfyui_recording.py) and the tests' decoding
(tests/recorded_tensors.py) agree: every fixture tensor reads back as the float32 values written."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from tests.recorded_tensors import tensor

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from comfyui_recording import b64  # noqa: E402  (a script-folder module, imported by name as the recorders do)


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
