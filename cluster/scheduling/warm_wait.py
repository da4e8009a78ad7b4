"""Delay scheduling for weights: wait for a busy executor that holds them rather than load them.

A denoising step takes a fraction of a second while loading a diffusion model takes seconds (Flux1-Dev
on an H800: 0.24 s per step, 2.9 s to load from host memory). When `place` can only offer a free
executor without the weights, loading there is often slower than waiting for a busy holder to finish
its current invocation. These functions make that decision from plain values so that the simulator
and the head share it:

- `should_park`: after placement chose a cold executor, park the invocation when a busy holder is
  expected to be free sooner than the load would take (at most `max_waiters_per_holder` parked per
  holder, beyond that the model needs another copy and loading elsewhere is the right call);
- `pick_parked`: when an executor becomes free, which parked invocation it takes: the oldest whose
  weights it holds, else the oldest that has waited as long as loading would have taken (its holders
  stayed busy or evicted the weights, so waiting longer only adds delay);
- `load_estimate`: seconds to bring a model's missing layers in, for both decisions.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class WarmWaitPolicy:
    enabled: bool = True
    max_waiters_per_holder: int = 1


@dataclass(frozen=True)
class Parked:
    """One parked invocation as the decision sees it."""

    model_key: str
    since: float  # when it was parked (same clock as `now`)
    load_s: float  # what loading it on a cold executor would take


def load_estimate(layers: int, resident_layers: int, full_load_s: float) -> float:
    """Seconds to load the layers of a model that are not resident (uniform layers)."""
    if layers <= 0:
        return 0.0
    return max(0, layers - resident_layers) * full_load_s / layers


def should_park(
    load_s: float, holders_free_in: Sequence[float], already_parked: int, policy: WarmWaitPolicy = WarmWaitPolicy()
) -> bool:
    """Whether to park an invocation instead of loading its weights on the cold executor `place` chose.

    load_s: expected load time there; holders_free_in: for each busy executor holding the weights,
    seconds until it is expected to be free (its running work's estimate minus the time it has run,
    at least 0); already_parked: invocations of the same model already parked."""
    if not policy.enabled or not holders_free_in:
        return False
    if already_parked >= policy.max_waiters_per_holder * len(holders_free_in):
        return False
    return min(holders_free_in) < load_s


def pick_parked(parked: Sequence[Parked], holds: Collection[str], now: float) -> int | None:
    """Index into `parked` of the invocation a newly free executor holding `holds` should run, or None."""
    best: int | None = None
    for i, p in enumerate(parked):
        if p.model_key in holds or now - p.since >= p.load_s:
            if best is None or p.since < parked[best].since:
                best = i
    return best
