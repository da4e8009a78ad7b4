"""Linear and convolution layers of loaded diffusion models compute each sample independently of the
batch around it, so batched denoising steps reproduce unbatched ones bit for bit."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from nodes.models.batch_invariant import (
    BatchInvariantConv2d,
    BatchInvariantLinear,
    make_batch_invariant,
)

# cuBLAS and cuDNN pick kernels by size as CPU GEMMs do: the same checks on a GPU where there is one
DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")),
]


@pytest.mark.parametrize("device", DEVICES)
def test_rows_of_a_2d_input_give_the_same_bits_at_any_batch_size(fixed_threads, device):
    torch.manual_seed(0)
    layer = make_batch_invariant(nn.Sequential(nn.Linear(320, 1280), nn.SiLU(), nn.Linear(1280, 1280))).to(device)
    x = torch.randn(8, 320, device=device)
    with torch.inference_mode():
        alone = [layer(x[i : i + 1]) for i in range(8)]
        for batch in (2, 3, 4, 8):
            out = layer(x[:batch])
            assert all(torch.equal(out[i : i + 1], alone[i]) for i in range(batch)), batch


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("rows", [1, 2, 3, 4, 5, 8, 11, 12, 13, 16, 77])
def test_samples_of_few_rows_give_the_same_bits_at_any_batch_size(threads, rows):
    """[batch, rows, features] inputs: MKL's default path rounds a sample of few rows (PixelDiT's [batch, 1, features]
    modulation; up to 11 rows on 2 threads on AVX2, 15 on AVX-512) by the batch around it; the batch-invariant one
    multiplies those a sample at a time. (Under MKL's strict reproducibility, which cluster/__init__.py sets and so
    these tests run with, a plain Linear did not round by the batch either; the class keeps the bits where it is
    not set or another BLAS is used.)"""
    torch.set_num_threads(threads)
    torch.manual_seed(rows)
    plain = nn.Linear(64, 384)
    layer = BatchInvariantLinear(64, 384)
    layer.load_state_dict(plain.state_dict())
    x = torch.randn(8, rows, 64)
    with torch.inference_mode():
        alone = [layer(x[i : i + 1]) for i in range(8)]
        for batch in (2, 3, 4, 8):
            out = layer(x[:batch])
            assert all(torch.equal(out[i : i + 1], alone[i]) for i in range(batch)), batch
        assert torch.equal(layer(x[:1]), plain(x[:1]))  # alone, it is the plain layer


@pytest.mark.parametrize("device", DEVICES)
def test_samples_of_a_1x1_convolution_give_the_same_bits_at_batch_16(fixed_threads, device):
    torch.manual_seed(0)
    conv = make_batch_invariant(nn.Sequential(nn.Conv2d(32, 32, 1))).to(device)  # a GEMM over batch x pixels
    x = torch.randn(16, 32, 8, 8, device=device)
    with torch.inference_mode():
        alone = conv(x[:2])
        assert all(torch.equal(conv(x[:n])[:2], alone) for n in (4, 8, 16))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(
    "shape",  # (in, out, kernel, stride, side): torch runs one sample natively, or through oneDNN
    [(4, 32, 3, 1, 8), (32, 32, 3, 2, 8), (32, 32, 1, 1, 8), (64, 64, 3, 1, 32), (8, 8, 5, 1, 8)],
)
def test_cpu_convolutions_run_the_whole_batch_in_one_kernel_with_single_sample_bits(shape, threads):
    """The batch runs as one call of the kernel torch picks for a single sample (not one call per sample),
    and every sample gets the bits torch gives it alone."""
    cin, cout, k, stride, side = shape
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        torch.manual_seed(0)
        conv = make_batch_invariant(nn.Sequential(nn.Conv2d(cin, cout, k, stride, padding=k // 2)))[0]
        x = torch.randn(16, cin, side, side)
        with torch.inference_mode():
            alone = [nn.functional.conv2d(x[i : i + 1], conv.weight, conv.bias, stride, k // 2) for i in range(16)]
            for batch in (1, 2, 3, 16):
                with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                    out = conv(x[:batch])
                kernels = [e.key for e in prof.key_averages() for _ in range(e.count) if e.key in _CONV_KERNELS]
                assert len(kernels) == 1, (batch, kernels)
                assert all(torch.equal(out[i : i + 1], alone[i]) for i in range(batch)), batch
    finally:
        torch.set_num_threads(before)


_CONV_KERNELS = ("aten::thnn_conv2d", "aten::mkldnn_convolution")  # torch's two CPU kernels


@pytest.mark.parametrize("shape", [(640, 640, 1, 8), (320, 640, 2, 16)])  # (in, out, stride, side): 64 output pixels
def test_small_outputs_of_wide_convolutions_run_natively_with_the_same_bits_at_any_batch_and_thread_count(shape):
    """An SD UNet's deep levels (many channels, few pixels) run through the native kernel, which torch would give
    to oneDNN: the same bits for a sample alone and in batches of 2, 3 and 5, on one thread and on two."""
    cin, cout, stride, side = shape
    before = torch.get_num_threads()
    torch.manual_seed(0)
    conv = make_batch_invariant(nn.Sequential(nn.Conv2d(cin, cout, 3, stride, padding=1)))[0]
    x = torch.randn(5, cin, side, side)
    try:
        with torch.inference_mode():
            torch.set_num_threads(1)
            alone = [conv(x[i : i + 1]) for i in range(5)]
            for threads in (1, 2):
                torch.set_num_threads(threads)
                for batch in (1, 2, 3, 5):
                    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                        out = conv(x[:batch])
                    kernels = [e.key for e in prof.key_averages() for _ in range(e.count) if e.key in _CONV_KERNELS]
                    assert kernels == ["aten::thnn_conv2d"], (threads, batch, kernels)
                    assert all(torch.equal(out[i : i + 1], alone[i]) for i in range(batch)), (threads, batch)
                    assert torch.get_num_threads() == threads  # the lone sample's one thread is given back
    finally:
        torch.set_num_threads(before)


def test_keeps_parameters_and_state_dict_and_token_inputs_use_one_gemm():
    plain = nn.Linear(16, 32)
    patched = make_batch_invariant(nn.Sequential(nn.Linear(16, 32)))[0]
    patched.load_state_dict(plain.state_dict())
    assert type(patched) is BatchInvariantLinear and set(patched.state_dict()) == {"weight", "bias"}
    tokens = torch.randn(2, 128, 16)  # more rows per sample than few_rows_bound(): one GEMM
    assert torch.equal(patched(tokens), nn.functional.linear(tokens, plain.weight, plain.bias))


def test_loaded_denoisers_and_controlnets_have_no_plain_linear(demo_workspace, monkeypatch):
    from nodes import workspace
    from nodes.loaders import CheckpointLoaderSimple, ControlNetLoader
    from nodes.models.loader import load_controlnet, load_diffusion_model

    monkeypatch.setattr(workspace, "_active", demo_workspace)  # another test may have switched it
    loaded = [
        load_diffusion_model(CheckpointLoaderSimple().load_checkpoint(name)[0])
        for name in ("sd1-tiny.safetensors", "sdxl-tiny.safetensors", "flux-tiny.safetensors")
    ]
    loaded.append(load_controlnet(ControlNetLoader().load_controlnet("sd1-tiny-controlnet.safetensors")[0]))
    for component in loaded:
        layers = list(component.module.modules())
        assert not [m for m in layers if type(m) in (nn.Linear, nn.Conv2d)], component.arch
        assert any(isinstance(m, BatchInvariantLinear) for m in layers), component.arch
        if component.arch != "flux":
            assert any(isinstance(m, BatchInvariantConv2d) for m in layers), component.arch
