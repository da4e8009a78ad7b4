"""The executor core: what runs one dispatch, with or without a process boundary around it.

One run: the parts' inputs pulled onto the core's device, the model made resident through
`ExecutorModels` and the layer-granular weight cache under the memory budget, the ModelFn executed
(once for a batch of compatible parts, merged along the batch), the outputs handed on, and the
time measured and charged per part. Two shells drive it, as vLLM's in-process client and its
engine-core process drive the same `EngineCore`:

- the executor process (cluster.executor.process): its socket loop around the core, tensors through the
  data plane's arena (`ArenaIO`: pulled from the producers' segments, published into its own);
- the in-process runtime (cluster.local, `--executors 0`): the caller's tensors handed in and the
  outputs handed back as they are (`DirectIO`), since nothing crosses a process.

Both get the same budget, layer cache and batching; only the tensors' way in and out differs.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
import time
import traceback
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import psutil
import torch

from cluster.call import Params
from cluster.dataplane.budget import ActivationPeaks, BudgetSnapshot, CudaPeakProbe, MemoryBudget
from cluster.dataplane.segments import SegmentError
from cluster.executor.models import ExecutorModels
from cluster.modelfn import ModelFn, get_model_fn
from cluster.refs import ModelRef
from cluster.scheduling.batching import Call, charge_shares, merge, run_merged
from cluster.weights.cache import LayerCache, build_layer_cache

log = logging.getLogger("cluster.executor")
T = TypeVar("T")

CPU_BUDGET = 8 << 30
MIN_GPU_BUDGET = 1 << 30


def gpu_reserve(total: int) -> int:
    """Device memory left out of the budget: the CUDA context, cuBLAS/cuDNN workspaces, the caching
    allocator's fragmentation and activations beyond their charged input bytes, which all grow with
    the models a bigger GPU runs: max(8 GiB, 10 %), at most half the device (a small GPU)."""
    return min(max(8 << 30, total // 10), total // 2)


def default_memory_budget(device: str, share: int = 1) -> int:
    """What a core manages when not told: on a GPU, its share (`share` executors on the device) of
    the memory free at start less the reserve (the idle memory the layer cache and the arena harvest);
    on the CPU, 8 GiB."""
    if not device.startswith("cuda"):
        return CPU_BUDGET
    free, total = torch.cuda.mem_get_info(torch.device(device))
    return max((free - gpu_reserve(total)) // max(share, 1), MIN_GPU_BUDGET)


def retry_after_oom(call: Callable[[], T], free: Callable[[], int]) -> T:
    """`call()`, and once more after a device OutOfMemoryError: `free()` gives cached weights back and
    the allocator returns its cached blocks first. A second OutOfMemoryError is raised (it does not fit)."""
    try:
        return call()
    except torch.OutOfMemoryError as e:
        # retried outside the handler: the traceback's frames hold the failed call's tensors
        log.warning("out of device memory (%s); evicting cached weights and retrying once", str(e).split("\n")[0])
    freed = free()
    if torch.cuda.is_initialized():
        torch.cuda.empty_cache()
    log.info("freed %d bytes of cached weights", freed)
    return call()


def cap_device_memory(device: str, budget: int, share: int) -> float | None:
    """Executors sharing a GPU: cap this process's caching allocator at its budget plus its share of the
    reserve (the allocator keeps freed blocks, so without a cap one executor's evicted layers stay
    reserved and starve the others). Returns the fraction set, or None (alone on the device, or the CPU)."""
    if not device.startswith("cuda") or share <= 1:
        return None
    dev = torch.device(device)
    _, total = torch.cuda.mem_get_info(dev)
    fraction = min(1.0, (budget + gpu_reserve(total) // share) / total)
    torch.cuda.set_per_process_memory_fraction(fraction, dev)
    return fraction


def default_host_bytes(device: str, memory_budget: int, share: int = 1) -> int:
    """Host memory for whole models before they spill to disk: as much as the budget on the CPU; beside a
    GPU at most a quarter of the machine's memory split over the `share` executors of the host (the pages
    are pinned, and every executor keeps its own)."""
    if not device.startswith("cuda"):
        return memory_budget
    return min(memory_budget, psutil.virtual_memory().total // 4 // max(share, 1))


@dataclass
class Part:
    """One invocation as the core sees it. `inputs` is what the run's `TensorIO` pulls from: tensor
    metadata in the executor process, the tensors themselves in-process."""

    ref: ModelRef | None
    params: Params  # of the ModelFn's Params type (cluster.call)
    inputs: dict[str, Any]
    nulls: Sequence[str] = ()


@dataclass
class Ran:
    outputs: Any  # what the TensorIO's `deliver` made of the outputs (handles, or the tensors)
    nulls: list[str]  # outputs that were None
    measured_s: float  # this part's share of the run's measured time
    wall_s: float
    load_s: float  # part of the wall time spent loading the model from its files
    batch: int = 1  # parts that shared the run
    batch_s: float = 0.0  # measured time of the whole shared run (0.0: the part ran alone)


@dataclass
class Fault:
    error: Exception  # raised again by an in-process caller, so its type survives
    traceback: str
    measured_s: float
    lost_input: bool = False  # an input's producer was gone: the caller re-sends it


@dataclass(frozen=True)
class CoreStats:
    budget: BudgetSnapshot
    loads: int  # models built from their files (cache misses)
    hits: int  # runs whose model was already loaded
    evictions: int  # layers evicted under the budget so far
    resident: list[str]  # ModelRef keys whose first layer is resident


class TensorIO(ABC):
    """How one run's tensors come in and go out. A run opens one `scope`; `inputs` and `deliver` are
    called inside it, once per part."""

    @abstractmethod
    def scope(self) -> contextlib.AbstractContextManager[None]:
        """What the pulled inputs live in; closing it frees them. Outputs are delivered before it closes
        (an output may be a view of an input)."""

    @abstractmethod
    def inputs(self, fn: ModelFn, part: Part) -> dict[str, Any]:
        """`part`'s inputs on the core's device, callback inputs (fn.inputs[k].callback) as zero-argument
        callables or tensors, its nulls as None. Raises `SegmentError` when a producer's data is gone."""

    @abstractmethod
    def input_bytes(self, part: Part) -> int:
        """Bytes of `part`'s tensor inputs (the activations reserved in the budget while it runs)."""

    @abstractmethod
    def deliver(self, outputs: dict[str, torch.Tensor | None]) -> Any:
        """Hand the outputs of one part on; the result goes into `Ran.outputs`."""

    def finish(self) -> None:
        """After the scope closed: reclaim what readers have released."""


class DirectIO(TensorIO):
    """In-process: the caller's tensors go in (moved to the core's device if elsewhere) and the outputs come
    back without a copy through shared memory. Both are made contiguous, as the data plane delivers them to
    and from an executor process: a kernel may pick another algorithm for another memory layout (a conv on
    a channels-last view rounds differently), and the two modes must give the same bits."""

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def scope(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def inputs(self, fn: ModelFn, part: Part) -> dict[str, Any]:
        placed = {
            k: v.to(self.device).contiguous() if isinstance(v, torch.Tensor) else v for k, v in part.inputs.items()
        }
        placed.update({k: None for k in part.nulls})
        return placed

    def input_bytes(self, part: Part) -> int:
        return sum(v.numel() * v.element_size() for v in part.inputs.values() if isinstance(v, torch.Tensor))

    def deliver(self, outputs: dict[str, torch.Tensor | None]) -> dict[str, torch.Tensor | None]:
        return {k: v.contiguous() if isinstance(v, torch.Tensor) else v for k, v in outputs.items()}


class ExecutorCore:
    """Runs dispatches, one at a time (callers serialise): a ModelFn registry, the models resident under
    `budget` through `cache`, and the run itself. `threads` says how the measured time is taken: torch's
    thread count (one: the calling thread's CPU time; several: the process's), or None for the wall
    time (in-process, where node bodies share the process's CPU)."""

    def __init__(self, budget: MemoryBudget, cache: LayerCache, device: str = "cpu", threads: int | None = 1) -> None:
        self.budget, self.device, self.threads = budget, device, threads
        self.peaks = ActivationPeaks()
        # measures each call's activation peak where the allocator can tell (a GPU); tests may set another
        self.peak_probe: Any = CudaPeakProbe(device, budget) if device.startswith("cuda") else None
        self.models = ExecutorModels(cache)
        self._fns: dict[str, ModelFn] = {}
        self._weights_tmp: tempfile.TemporaryDirectory | None = None

    @classmethod
    def in_process(
        cls,
        device: str = "cpu",
        memory_budget: int | None = None,
        host_bytes: int | None = None,
        weights_dir: str | Path | None = None,
    ) -> ExecutorCore:
        """A core of its own, without an arena (nothing is exchanged through shared memory): budget and
        layer cache as an executor's on `device`, whole models past `host_bytes` spilling to `weights_dir`
        (a temporary folder, removed with the process, when not given)."""
        budget = MemoryBudget(default_memory_budget(device) if memory_budget is None else memory_budget)
        tmp = tempfile.TemporaryDirectory(prefix="comfy-cluster-weights-") if weights_dir is None else None
        cache = build_layer_cache(
            budget,
            device,
            weights_dir or tmp.name,
            default_host_bytes(device, budget.total) if host_bytes is None else host_bytes,
        )
        core = cls(budget, cache, device, threads=None)
        core._weights_tmp = tmp  # the folder lives (and is removed) with the core
        return core

    def fn(self, name: str) -> ModelFn:
        fn = self._fns.get(name)
        if fn is None:
            fn = self._fns[name] = get_model_fn(name)()
        return fn

    def stats(self) -> CoreStats:
        return CoreStats(
            self.budget.snapshot(),
            self.models.loads,
            self.models.hits,
            len(self.models.cache.evictions),
            self.models.resident(),
        )

    def free_idle_weights(self) -> int:
        """Evict every cached layer of the models not running now; returns the bytes given back."""
        return self.models.cache.evict(self.budget.total)

    def unload(self) -> None:
        """Forget every loaded model, its host and disk copies too (ComfyUI's /free)."""
        self.models.unload()

    def run(self, fn_name: str, parts: Sequence[Part], io: TensorIO) -> list[Ran | Fault]:
        """Run `parts` (invocations of ModelFn `fn_name`): one part alone; several as one merged call,
        and if that fails, one by one, so one part's bad input fails only that part. One result per part,
        in order; a ModelFn's exception comes back as a `Fault`, never raised."""
        if len(parts) == 1:
            return [self._run_one(fn_name, parts[0], io)]
        try:
            return self._run_merged(fn_name, parts, io)
        except Exception as e:
            log.warning(
                "merged run of %d %r parts failed (%s: %s); running them one by one",
                len(parts),
                fn_name,
                type(e).__name__,
                e,
            )
            return [self._run_one(fn_name, p, io) for p in parts]

    # -----------------------------------------------------------------------------------------------
    def _clock(self) -> float:
        # One torch thread: all compute is this thread's. Several: torch's pool does it, and the
        # executor runs one invocation at a time, so the process's CPU time is the invocation's.
        if self.threads is None:
            return time.perf_counter()
        return time.thread_time() if self.threads == 1 else time.process_time()

    def _sync(self) -> None:
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()

    def _measured(self, t_wall: float, t_clock: float) -> tuple[float, float]:
        """(measured, wall) seconds since the run began: on a GPU the wall time (synchronised before),
        on the CPU the clock's."""
        wall = time.perf_counter() - t_wall
        return (wall if self.device.startswith("cuda") else self._clock() - t_clock), wall

    @contextlib.contextmanager
    def _resident(self, fn: ModelFn, ref: ModelRef | None, input_bytes: int) -> Iterator[tuple[Any, float]]:
        """(model, load seconds) resident for one execute, with its activations reserved beside it: as
        measured for this ModelFn and input size before, else the inputs' bytes (measured now)."""
        model = self.models.use(fn, ref) if ref is not None else contextlib.nullcontext((None, 0.0))
        with (
            torch.inference_mode(),
            model as (weights, load_s),
            self.budget.reserve(self.peaks.charge(fn.name, input_bytes)),
        ):
            if self.peak_probe is not None:
                self.peak_probe.start()
            yield weights, load_s
            if self.peak_probe is not None:
                self.peaks.record(fn.name, input_bytes, self.peak_probe.stop())

    def _run_one(self, fn_name: str, part: Part, io: TensorIO) -> Ran | Fault:
        t_wall, t_clock = time.perf_counter(), self._clock()
        stage = "inputs"
        try:
            fn = self.fn(fn_name)
            with io.scope():
                inputs = io.inputs(fn, part)
                stage = "execute"
                with self._resident(fn, part.ref, io.input_bytes(part)) as (model, load_s):
                    out = retry_after_oom(lambda: fn.execute(model, inputs, part.params), self.free_idle_weights)
                self._sync()
                # delivered (published) before the scope frees the pulled inputs an output may view
                delivered = io.deliver(out)
            io.finish()
            measured, wall = self._measured(t_wall, t_clock)
            return Ran(delivered, [k for k, v in out.items() if v is None], measured, wall, load_s)
        except Exception as e:  # reported to the caller, which raises it
            return Fault(
                e,
                traceback.format_exc(),
                self._clock() - t_clock,
                lost_input=stage == "inputs" and isinstance(e, SegmentError),
            )

    def _run_merged(self, fn_name: str, parts: Sequence[Part], io: TensorIO) -> list[Ran]:
        t_wall, t_clock = time.perf_counter(), self._clock()
        fn = self.fn(fn_name)
        with io.scope():
            calls = [Call(fn_name, p.ref, io.inputs(fn, p), p.params) for p in parts]
            merged = merge(calls)  # ValueError when the parts are not compatible after all
            activations = 2 * sum(io.input_bytes(p) for p in parts)  # inputs + merged copy
            with self._resident(fn, merged.ref, activations) as (model, load_s):
                outs = retry_after_oom(lambda: run_merged(fn, model, merged), self.free_idle_weights)
            self._sync()
            delivered = [io.deliver(out) for out in outs]
        io.finish()
        measured, wall = self._measured(t_wall, t_clock)
        shares = charge_shares(merged.sizes, measured)
        return [
            Ran(
                d,
                [k for k, v in out.items() if v is None],
                share,
                wall,
                load_s if i == 0 else 0.0,
                len(parts),
                measured,
            )
            for i, (d, out, share) in enumerate(zip(delivered, outs, shares))
        ]
