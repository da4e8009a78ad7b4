"""prepare_noise and the per-step noise samplers."""

from __future__ import annotations

import io

import torch

from nodes.sampling.noise import BrownianNoise, GaussianNoise, prepare_noise


def test_prepare_noise_is_seeded_cpu_randn():
    latent = torch.zeros(2, 4, 8, 8)
    torch.manual_seed(1234)
    ref = torch.randn(2, 4, 8, 8)
    got = prepare_noise(latent, 1234)
    assert torch.equal(got, ref), f"max abs diff {(got - ref).abs().max().item()}"


def test_prepare_noise_leaves_the_global_generator_alone():
    torch.manual_seed(7)
    expect = torch.randn(3)
    torch.manual_seed(7)
    prepare_noise(torch.zeros(1, 4, 8, 8), 99)
    got = torch.randn(3)
    assert torch.equal(got, expect), f"max abs diff {(got - expect).abs().max().item()}"


def test_batch_index_takes_the_draws_of_those_positions():
    latent = torch.zeros(1, 4, 8, 8)
    full = prepare_noise(torch.zeros(6, 4, 8, 8), 42)
    got = prepare_noise(latent.expand(3, -1, -1, -1), 42, batch_index=[5, 2, 2])
    ref = full[[5, 2, 2]]
    assert torch.equal(got, ref), f"max abs diff {(got - ref).abs().max().item()}"


def test_largest_seed_works():
    seed = 2**64 - 1
    got = prepare_noise(torch.zeros(1, 4, 8, 8), seed)
    ref = torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(seed))
    assert torch.equal(got, ref) and torch.isfinite(got).all()
    assert not torch.equal(got, prepare_noise(torch.zeros(1, 4, 8, 8), seed - 1))


def test_gaussian_noise_resumes_from_saved_state():
    x = torch.zeros(1, 4, 8, 8)
    one = GaussianNoise(x, 5)
    s = torch.tensor(1.0)
    run = [one(s, s) for _ in range(3)]
    state: dict = {}
    got = []
    for _ in range(3):
        buf = io.BytesIO()
        torch.save(state, buf)
        buf.seek(0)
        state = torch.load(buf)
        noise = GaussianNoise.from_state(5, x, state)
        got.append(noise(s, s))
        noise.save_state(state)
    diff = max((a - b).abs().max().item() for a, b in zip(run, got))
    assert all(torch.equal(a, b) for a, b in zip(run, got)), f"max abs diff {diff}"
    # On the CPU the stream is seeded with seed + 1 (ComfyUI 0.10.0): its first draw is not the initial noise.
    ref = torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(6))
    assert torch.equal(run[0], ref) and not torch.equal(run[0], prepare_noise(x, 5))
    # the largest seed KSampler offers wraps to 0 instead of overflowing the generator
    largest = GaussianNoise(x, 2**64 - 1)(s, s)
    assert torch.equal(largest, torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(0)))


def test_brownian_noise_is_unit_variance_and_additive():
    x = torch.zeros(1, 1, 100, 100)
    sigmas = torch.tensor([10.0, 4.0, 1.0, 0.1, 0.0])
    bn = BrownianNoise(x, sigmas, seed=3)
    a, b, c = torch.tensor(10.0), torch.tensor(4.0), torch.tensor(1.0)
    n_ab, n_bc, n_ac = bn(a, b), bn(b, c), bn(a, c)
    for n in (n_ab, n_bc, n_ac):
        assert abs(n.mean().item()) < 0.04 and abs(n.var().item() - 1) < 0.05, (n.mean().item(), n.var().item())
    # W(a,c) = W(a,b) + W(b,c): the increments belong to one Brownian path.
    w_sum = n_ab * 6.0**0.5 + n_bc * 3.0**0.5
    diff = (w_sum - n_ac * 9.0**0.5).abs().max().item()
    assert diff < 1e-3, f"max abs diff {diff}"
    corr = torch.corrcoef(torch.stack([n_ab.flatten(), n_bc.flatten()]))[0, 1].item()
    assert abs(corr) < 0.05, f"disjoint increments correlate: {corr}"


def test_brownian_noise_rebuilt_from_seed_matches_a_persistent_tree():
    x = torch.zeros(2, 4, 8, 8)
    sigmas = torch.tensor([14.6, 7.0, 3.1, 1.2, 0.4, 0.03, 0.0])
    persistent = BrownianNoise(x, sigmas, seed=11)
    queries = [(sigmas[i], sigmas[i + 1]) for i in range(5)] + [(sigmas[2], torch.tensor(2.0))]
    for s0, s1 in queries:
        fresh = BrownianNoise.from_state(11, x, sigmas, {})(s0, s1)
        kept = persistent(s0, s1)
        assert torch.equal(fresh, kept), f"max abs diff {(fresh - kept).abs().max().item()}"
    other = BrownianNoise(x, sigmas, seed=12)(sigmas[0], sigmas[1])
    assert not torch.equal(other, persistent(sigmas[0], sigmas[1]))
