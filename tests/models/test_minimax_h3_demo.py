"""The tiny MiniMax H3 demo files: written byte-identically, in the published layouts (detected as such), and
loadable into a text-to-video evaluation and a decode."""

from __future__ import annotations

import torch
from safetensors.torch import load_file

from nodes.models.minimax_h3 import apply, is_minimax_h3, load_transformer
from nodes.models.minimax_h3_demo import TEXT_DIM, build_demo_minimax_h3
from nodes.models.minimax_h3_vae import decode, is_minimax_h3_vae, load_vae


def test_demo_files(tmp_path):
    torch.set_num_threads(1)
    first = build_demo_minimax_h3(tmp_path / "a")
    again = build_demo_minimax_h3(tmp_path / "b")
    assert [p.read_bytes() for p in first] == [p.read_bytes() for p in again]
    dit_sd, vae_sd = (load_file(p) for p in first[:2])
    assert is_minimax_h3(dit_sd) and "adaln_t_table" in dit_sd and not is_minimax_h3_vae(dit_sd)
    assert is_minimax_h3_vae(vae_sd) and not is_minimax_h3(vae_sd)
    assert sum(p.stat().st_size for p in first[:2]) < 6_000_000
    dit, vae = load_transformer(dit_sd, str(first[0])), load_vae(vae_sd, str(first[1]))
    g = torch.Generator().manual_seed(0)
    video, audio = torch.randn(1, 24, 2, 2, 2, generator=g), torch.randn(1, 32, 2, 3, generator=g)
    v, a = apply(dit, video, audio, torch.randn(1, 4, TEXT_DIM, generator=g), 0.7)
    assert v.shape == video.shape and a.shape == audio.shape and torch.isfinite(v).all() and v.abs().sum() > 0
    frames = decode(vae, video - 0.7 * v)
    assert frames.shape == (5, 32, 32, 3) and 0 <= frames.min() and frames.max() <= 1


def test_fasth3_file_loads_as_the_dense_model(tmp_path):
    """FastVideo's FastH3 layout (the tiny transformer plus a VSA compression gate per block): detected as MiniMax
    H3 and loaded without the gate, which ComfyUI's dense forward never reads, so it evaluates as the plain file."""
    from nodes.models.minimax_h3_demo import FILES

    torch.set_num_threads(1)
    build_demo_minimax_h3(tmp_path)
    plain, fast = (load_file(tmp_path / FILES[name]) for name in ("transformer", "fasth3"))
    gates = [k for k in fast if ".attn.to_gate_compress." in k]
    assert len(gates) == 2 and set(fast) - set(gates) == set(plain) and is_minimax_h3(fast)
    g = torch.Generator().manual_seed(1)
    video, audio = torch.randn(1, 24, 2, 2, 2, generator=g), torch.randn(1, 32, 2, 3, generator=g)
    context = torch.randn(1, 4, TEXT_DIM, generator=g)
    expected = apply(load_transformer(plain), video, audio, context, 0.6)
    for ours, theirs in zip(apply(load_transformer(fast, "fasth3.safetensors"), video, audio, context, 0.6), expected):
        torch.testing.assert_close(ours, theirs, atol=0, rtol=0)
