"""The executor's preloader in-process: it fills free memory with an expected model's first L_e layers
(Eq. 2 from the copy speed it timed and the head's compute time) and stops copying while a run goes on."""

from __future__ import annotations

import time

from cluster import messages as m
from cluster.call import NoParams, pack
from cluster.dataplane.budget import MemoryBudget
from cluster.executor.models import ExecutorModels
from cluster.executor.preloader import Preloader
from cluster.weights.cache import build_layer_cache
from cluster.weights.prefix import prefix_length
from tests.cluster.cluster_fns import LAYERS, StackFn, stack_ref

LAYER_S = 0.03  # seconds to copy one layer at the emulated bandwidth
LAYER_BYTES = 263_168


def _preloader(tmp_path) -> Preloader:
    cache = build_layer_cache(MemoryBudget(1 << 30), "cpu", tmp_path, None, h2d_bandwidth=LAYER_BYTES / LAYER_S)
    return Preloader(ExecutorModels(cache), lambda name: StackFn())


def _wait(cond, timeout_s: float = 20.0) -> None:
    end = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.01)


def test_the_preloader_copies_the_first_le_layers_and_yields_to_runs(tmp_path):
    p = _preloader(tmp_path)
    ref = stack_ref(7)
    compute_s = 0.4 * LAYERS * LAYER_S
    with p.paused():  # a run is going on when the head's list arrives
        p.want([m.PreloadModel(StackFn.name, ref.key, pack(StackFn.name, ref, NoParams()), compute_s)])
        time.sleep(0.5)
        # the model may be built meanwhile (files, no lock a run needs), but no layer is copied
        assert p.report().get(ref.key, [0])[0] == 0
    _wait(lambda: (r := p.report().get(ref.key)) is not None and r[0] >= r[1])
    time.sleep(0.3)
    resident, le, layers = p.report()[ref.key]
    assert layers == LAYERS and resident == le  # L_e layers, then it stopped
    # Eq. 2 at the emulated speed asks for 6 of 8; L_e came from the first copy's timing, a little slower
    assert prefix_length(LAYERS, LAYER_S, compute_s / LAYERS) == 6 and le in (6, 7)
    p.stop()


def test_a_cpu_that_shares_host_memory_preloads_nothing(tmp_path):
    cache = build_layer_cache(MemoryBudget(1 << 30), "cpu", tmp_path, None)
    p = Preloader(ExecutorModels(cache), lambda name: StackFn())
    ref = stack_ref(8)
    p.want([m.PreloadModel(StackFn.name, ref.key, pack(StackFn.name, ref, NoParams()), 0.0)])
    time.sleep(0.3)
    assert p.report() == {} and p.models.prebuilt == 0
