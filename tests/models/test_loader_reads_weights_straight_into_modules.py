"""Loading builds modules straight from the file: no random initialisation of parameters that the file
then overwrites, and weights already in the compute dtype are the file's memory map itself, not a copy."""

from __future__ import annotations

import os

import pytest
import torch
from safetensors.torch import save_file

from nodes.models.loader import load_diffusion_model, load_text_encoder, load_vae
from nodes.models.safetensors_io import ALIGN, build_module, load_state_dict

SD1 = "checkpoints/sd1-tiny.safetensors"
INITS = (
    "normal_",
    "uniform_",
    "zero_",
    "fill_",
    "random_",
    "bernoulli_",
    "exponential_",
    "log_normal_",
    "geometric_",
    "cauchy_",
)


def mapped_ranges(path: str) -> list[tuple[int, int]]:
    """Address ranges of this process's memory maps of `path`."""
    ranges = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            if line.rstrip().endswith(os.path.realpath(path)):
                lo, hi = line.split()[0].split("-")
                ranges.append((int(lo, 16), int(hi, 16)))
    return ranges


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="reads Linux's /proc/self/maps")
def test_float32_weights_are_views_of_the_files_memory_map(tmp_path):
    f = tmp_path / "linear.safetensors"
    tensors = {"bias": torch.randn(320), "weight": torch.randn(320, 200)}  # 1280 bytes: both aligned alike
    for pad in range(ALIGN):  # a header length that puts the tensor data on a 64-byte boundary
        save_file(tensors, str(f), metadata={"pad": "x" * pad})
        sd = load_state_dict(f)
        if sd["bias"].data_ptr() % ALIGN == 0:
            break
    module = build_module(lambda: torch.nn.Linear(200, 320), sd, str(f), "test")
    ranges = mapped_ranges(str(f))
    assert ranges, "the file is memory-mapped"
    for p in (module.weight, module.bias):
        assert any(lo <= p.data_ptr() < hi for lo, hi in ranges)


def test_a_view_that_is_not_aligned_as_torch_aligns_is_copied(tmp_path):
    f = tmp_path / "odd.safetensors"
    for pad in range(ALIGN):
        save_file({"bias": torch.randn(8), "weight": torch.randn(8, 4)}, str(f), metadata={"pad": "x" * pad})
        sd = load_state_dict(f)
        if sd["bias"].data_ptr() % ALIGN:
            break
    module = build_module(lambda: torch.nn.Linear(4, 8), sd, str(f), "test")
    assert module.bias.data_ptr() % ALIGN == 0 and torch.equal(module.bias, sd["bias"])


def test_float16_weights_are_converted_once_into_float32(tmp_path):
    f = tmp_path / "linear16.safetensors"
    w = torch.randn(30, 20).half()
    save_file({"weight": w, "bias": torch.zeros(30, dtype=torch.float16)}, str(f))
    module = build_module(lambda: torch.nn.Linear(20, 30), load_state_dict(f), str(f), "test")
    assert module.weight.dtype == torch.float32 and torch.equal(module.weight, w.float())


def test_loaders_draw_no_random_initial_weights(make_ref, monkeypatch):
    drawn: list[str] = []  # in-place initialisers run on real (not meta) tensors
    for name in INITS:
        original = getattr(torch.Tensor, name)

        def spy(self, *args, _name=name, _original=original, **kwargs):
            if not self.is_meta:
                drawn.append(f"{_name} {tuple(self.shape)}")
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, spy)
    unet = load_diffusion_model(make_ref("diffusion_model", SD1))
    clip = load_text_encoder(make_ref("text_encoder", SD1))
    vae = load_vae(make_ref("vae", SD1))
    assert drawn == []
    for m in (unet.module, *clip.modules.values(), vae.module):
        assert not any(t.is_meta for t in (*m.parameters(), *m.buffers()))
