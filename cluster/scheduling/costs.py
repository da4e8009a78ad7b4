"""Execution-time estimates from measured history, per ModelFn, weights and input shapes.

The scheduler charges an estimate at dispatch (Algorithm 1) and corrects it with the measured time
on completion; the same measurements feed these estimates. Lookups fall back from the exact
(fn, model, shapes) key to (fn, model), then fn, then a default, so a new shape is priced like its
nearest known relative instead of at zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cluster.call import Params

DEFAULT_ESTIMATE_S = 0.05


def shape_signature(inputs: Mapping[str, Any]) -> tuple:
    """The input shapes an execution time depends on (names sorted; None inputs count as absent)."""
    return tuple(sorted((k, tuple(v.shape)) for k, v in inputs.items() if hasattr(v, "shape")))


class CostModel:
    """Exponentially weighted moving averages of measured execution times."""

    def __init__(self, alpha: float = 0.3, default_s: float = DEFAULT_ESTIMATE_S) -> None:
        self.alpha = alpha
        self.default_s = default_s
        self._avg: dict[tuple, float] = {}
        self._count: dict[tuple, int] = {}

    @staticmethod
    def _keys(fn: str, model_key: str, shapes: tuple) -> tuple[tuple, ...]:
        return (fn, model_key, shapes), (fn, model_key), (fn,)

    def estimate(self, fn: str, model_key: str = "", shapes: tuple = ()) -> float:
        for key in self._keys(fn, model_key, shapes):
            if key in self._avg:
                return self._avg[key]
        return self.default_s

    def observe(self, fn: str, model_key: str, shapes: tuple, seconds: float) -> None:
        for key in self._keys(fn, model_key, shapes):
            n = self._count.get(key, 0)
            prev = self._avg.get(key, seconds)
            self._avg[key] = seconds if n == 0 else prev + self.alpha * (seconds - prev)
            self._count[key] = n + 1

    def measured(self, fn: str, model_key: str) -> float | None:
        """The average over every shape of (fn, model), or None when never measured (no default)."""
        return self._avg.get((fn, model_key))

    def samples(self, fn: str, model_key: str = "", shapes: tuple = ()) -> int:
        return self._count.get((fn, model_key, shapes), 0)


def remaining_critical_path(
    fn: str, inputs: Mapping[str, Any], params: Params, costs: CostModel, model_key: str, shapes: tuple
) -> float:
    """Work of the request still to come after this invocation, along its critical path.

    Only the denoising loop is known from one call (the sigmas and the step index say how many steps
    follow: a denoise step's params carry its `step`); the rest of a graph is opaque to the runtime, so it counts as zero.
    """
    if fn == "denoise_step" and "sigmas" in inputs and hasattr(inputs["sigmas"], "shape"):
        steps_after = max(int(inputs["sigmas"].shape[0]) - 2 - int(getattr(params, "step", 0)), 0)
        return steps_after * costs.estimate(fn, model_key, shapes) + costs.estimate("vae_decode")
    return 0.0
