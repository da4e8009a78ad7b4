"""f(t) is measured online from the discriminator's recent confidences."""

from __future__ import annotations

import random

import pytest

from cluster.cascade.deferral import DeferralCurve


def test_curve_is_the_share_of_confidences_below_t():
    rng = random.Random(3)
    values = [rng.random() ** 2 for _ in range(500)]
    curve = DeferralCurve(window=1000)
    curve.observe_many(values)
    for t in (0.0, 0.1, 0.25, 0.5, 0.9, 1.0):
        assert curve(t) == pytest.approx(sum(v < t for v in values) / len(values))
    assert curve(0.25) == pytest.approx(0.5, abs=0.08)  # P(u^2 < 0.25) = 0.5


def test_window_forgets_old_confidences():
    curve = DeferralCurve(window=100)
    curve.observe_many([0.9] * 100)
    assert curve(0.5) == 0.0
    curve.observe_many([0.1] * 60)
    assert len(curve) == 100 and curve(0.5) == pytest.approx(0.6)


def test_prior_is_used_until_data_arrives():
    curve = DeferralCurve(prior=[(0.0, 0.2), (0.5, 1.0)])
    assert curve(0.25) == pytest.approx(0.6) and curve(0.8) == 1.0
    curve.observe(0.3)
    assert curve(0.25) == 0.0 and curve(0.35) == 1.0
