"""f(t), the fraction of queries a threshold t sends to the heavy model, measured from the
discriminator's recent confidences (a sliding window, so it follows drift in the prompt mix)."""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Iterable, Sequence


class DeferralCurve:
    """Empirical CDF of the last `window` confidences: f(t) = share of confidences below t.

    Before any confidence is seen, f(t) follows `prior` (default: t itself, a uniform guess), so the
    controller still has a curve to plan with on a cold start."""

    def __init__(self, window: int = 1000, prior: Sequence[tuple[float, float]] | None = None) -> None:
        self.window = window
        self._recent: deque[float] = deque(maxlen=window)
        self._sorted: list[float] = []
        self.prior = sorted(prior) if prior else [(0.0, 0.0), (1.0, 1.0)]

    def observe(self, confidence: float) -> None:
        if len(self._recent) == self.window:
            old = self._recent[0]
            del self._sorted[bisect.bisect_left(self._sorted, old)]
        self._recent.append(float(confidence))
        bisect.insort(self._sorted, float(confidence))

    def observe_many(self, confidences: Iterable[float]) -> None:
        for c in confidences:
            self.observe(c)

    def __len__(self) -> int:
        return len(self._sorted)

    def __call__(self, t: float) -> float:
        if not self._sorted:
            return _interp(self.prior, t)
        return bisect.bisect_left(self._sorted, t) / len(self._sorted)

    def curve(self, thresholds: Sequence[float]) -> tuple[float, ...]:
        return tuple(self(t) for t in thresholds)


def _interp(points: list[tuple[float, float]], t: float) -> float:
    if t <= points[0][0]:
        return points[0][1]
    for (t0, f0), (t1, f1) in zip(points, points[1:]):
        if t <= t1:
            return f0 + (f1 - f0) * (t - t0) / (t1 - t0) if t1 > t0 else f1
    return points[-1][1]
