"""The layer cache: which layers of which models are resident on the device, and making more so.

Per model: a meta-device skeleton, its layer lookup table and per-layer readiness. `use(key)`
yields the model at once; layers that are not resident stream in, in order, on a background
loader while earlier layers compute (a forward pre-hook on each block waits for its layer), so a
model whose first L_e' layers are resident runs about as fast as a warm one. Memory comes from the
executor's budget; under pressure layers are evicted least recently used model first, each model's
layers in reverse order, so first layers (the ones that hide loading) stay longest. A layer may
also live in the communication arena (weight virtualization); the arena takes those back first
when it needs room. `preload_layer` makes a layer resident from free memory only (preloading,
cluster.executor.preloader): it never evicts, and it leaves the model's place in the eviction order as it was,
so layers preloaded into a model nobody has used yet are the first to go.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from cluster.dataplane.arena import Arena, Block
from cluster.dataplane.budget import MemoryBudget
from cluster.weights.lookup import LayerTable, split_layers
from cluster.weights.tiers import DiskTier, HostTier, HostToDevice

_ALIGN = 256
_TORCH_ALIGN = 64  # what torch's CPU allocator guarantees


@dataclass
class _Model:
    key: str
    model: nn.Module
    table: LayerTable
    layers: list[nn.Module]
    ready: list[threading.Event]
    arena_blocks: dict[int, Block] = field(default_factory=dict)  # layers that live in the arena
    events: dict[int, object] = field(default_factory=dict)  # CUDA events of in-flight copies
    last_used: float = 0.0
    in_use: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class LayerCache:
    def __init__(self, budget: MemoryBudget, host: HostTier, copier: HostToDevice, arena: Arena | None = None) -> None:
        self.budget, self.host, self.copier, self.arena = budget, host, copier, arena
        self.device = copier.device
        self._models: dict[str, _Model] = {}
        self._lock = threading.RLock()
        self.evictions: list[tuple[str, int]] = []  # (model, layer) in the order they were evicted
        self.streamed = 0  # layers runs had to make resident (`use`)
        self.load_bps: float | None = None  # host -> device bytes/s, measured by `preload_layer`
        budget.add_reclaimer(self.evict)

    # -- registration -------------------------------------------------------------------------

    def register(
        self,
        key: str,
        factory: Callable[[], nn.Module],
        blocks: Callable[[nn.Module], list[nn.Module]],
        weights: dict[str, torch.Tensor] | None = None,
    ) -> None:
        """Make `key` known: `factory` builds the architecture (run on the meta device, so no memory),
        `blocks` lists its layers in execution order; `weights` go to the host tier (else they must
        already be on host or disk)."""
        with torch.device("meta"):
            model = factory().eval()
        if weights is not None:
            self.host.put(key, weights)
        elif not self.host.has(key):
            raise KeyError(f"no weights for {key} on host or disk")
        self._adopt(key, model, blocks(model))

    def register_module(
        self, key: str, module: nn.Module, blocks: Callable[[nn.Module], list[nn.Module]] | None = None
    ) -> nn.Module:
        """Adopt a model a ModelFn's load_model built: its weights move to the host tier and the
        module itself becomes the skeleton the cache binds layers into. Returns the module."""
        layers = (blocks or default_blocks)(module)
        names = [n for layer in split_layers(module, layers) for n in layer]
        state = dict(module.named_parameters()) | dict(module.named_buffers())
        self.host.put(key, {n: state[n].detach() for n in names})
        self._adopt(key, module.eval(), layers)
        return module

    def _adopt(self, key: str, model: nn.Module, layers: list[nn.Module]) -> None:
        table = LayerTable(model, split_layers(model, layers))
        for i in range(len(layers)):
            table.unbind(i)  # nothing is resident until loaded through the budget
        m = _Model(key, model, table, layers, [threading.Event() for _ in layers])
        for i, block in enumerate(layers):
            block.register_forward_pre_hook(self._waiter(m, i))
        with self._lock:
            if key in self._models:
                self.drop(key)
            self._models[key] = m

    def _waiter(self, m: _Model, i: int):
        def wait(_module, _args):
            m.ready[i].wait()
            if m.table.entries[i].region is None:
                raise RuntimeError(f"layer {i} of {m.key} failed to load")
            event = m.events.pop(i, None)
            if event is not None:
                torch.cuda.current_stream(self.device).wait_event(event)

        return wait

    # -- state --------------------------------------------------------------------------------

    def blocks(self, key: str) -> list[nn.Module]:
        return self._models[key].layers

    def num_layers(self, key: str) -> int:
        return len(self._models[key].table.entries)

    def resident(self, key: str) -> list[int]:
        return [i for i, e in enumerate(self._models[key].table.entries) if e.region is not None]

    def layer_bytes(self, key: str) -> list[int]:
        return [e.nbytes for e in self._models[key].table.entries]

    def regions(self, key: str) -> list[str | None]:
        return [e.region for e in self._models[key].table.entries]

    # -- loading ------------------------------------------------------------------------------

    def _load_layer(self, m: _Model, i: int, evict: bool = True) -> bool:
        """Make layer i resident; without `evict`, only if free memory holds it (False if not)."""
        entry = m.table.entries[i]
        if entry.region is not None:
            return True
        src = self.host.get(m.key, entry.names)
        dst, region = self._place(m, i, entry.nbytes, evict)
        if not region:
            return False
        if dst is None:  # the host tensors run as they are (HostToDevice.shares_host_memory), but
            # aligned as torch aligns its memory: kernels pick their code path (and rounding) by alignment,
            # and a layer read back from the disk tier (a memory map) must give the same bits
            dst = {n: t if t.data_ptr() % _TORCH_ALIGN == 0 else t.clone() for n, t in src.items()}
        else:
            event = self.copier.copy(src, dst)
            if event is not None:
                m.events[i] = event
        m.table.bind(i, dst, region)
        m.ready[i].set()
        return True

    def _place(self, m: _Model, i: int, nbytes: int, evict: bool = True) -> tuple[dict[str, torch.Tensor] | None, str]:
        """Destination tensors for layer i: framework memory within the budget, else free arena
        space, else framework memory after evicting others (over-committing rather than stalling);
        without `evict`, framework memory within the budget or nothing (region ""). Framework memory
        on a device that shares host memory is the host tensors themselves: None."""
        specs = {n: m.table.specs[n] for n in m.table.entries[i].names}
        if not self.budget.charge_weights(nbytes, evict=False):
            if not evict:
                return None, ""
            block = self.arena.alloc(sum(_padded(s, d) for s, d in specs.values())) if self.arena else None
            if block is not None:
                m.arena_blocks[i] = block
                out, off = {}, block.offset
                for n, (shape, dtype) in specs.items():
                    out[n] = self.arena.view(off, dtype, tuple(shape))
                    off += _padded(shape, dtype)
                return out, "arena"
            self.budget.charge_weights(nbytes, evict=True, force=True)
        if self.copier.shares_host_memory:
            return None, "framework"
        return {n: self.copier.empty(s, d) for n, (s, d) in specs.items()}, "framework"

    def warm(self, key: str, layers: int | None = None) -> None:
        """Make the first `layers` layers (all by default) resident now, synchronously."""
        m = self._models[key]
        n = len(m.ready) if layers is None else min(layers, len(m.ready))
        with m.lock:
            for i in range(n):
                self._load_layer(m, i)
        self._touch(m)

    def preload_layer(self, key: str, i: int) -> bool:
        """Make layer i of `key` resident if free memory holds it, never evicting, and time the copy
        (`load_bps`); the model's last use stays as it was. False when the budget has no room."""
        m = self._models[key]
        with m.lock:
            if m.table.entries[i].region is not None:
                return True
            t0 = time.perf_counter()
            if not self._load_layer(m, i, evict=False):
                return False
            self.copier.synchronize()
            seconds = time.perf_counter() - t0
        if seconds > 0:
            bps = m.table.entries[i].nbytes / seconds
            self.load_bps = bps if self.load_bps is None else 0.7 * self.load_bps + 0.3 * bps
        return True

    def resident_prefix(self, key: str) -> int:
        """How many of `key`'s first layers are resident, in a row."""
        n = 0
        for e in self._models[key].table.entries:
            if e.region is None:
                break
            n += 1
        return n

    def has(self, key: str) -> bool:
        return key in self._models

    @contextmanager
    def use(self, key: str) -> Iterator[nn.Module]:
        """The model, runnable at once; missing layers stream in behind its execution."""
        m = self._models[key]
        with self._lock:
            m.in_use += 1
        self._touch(m)
        missing = [i for i, e in enumerate(m.table.entries) if e.region is None]
        self.streamed += len(missing)
        for i in missing:
            m.ready[i].clear()
        loader = None
        if missing:
            loader = threading.Thread(target=self._stream, args=(m, missing), daemon=True, name=f"load-{key}")
            loader.start()
        try:
            if missing and missing[0] == 0:
                # Layer 0 also holds the parameters outside every block (embeddings, head), which
                # may run before the first block: the model is handed out once it is resident.
                self._waiter(m, 0)(None, None)
            yield m.model
        finally:
            if loader is not None:
                loader.join()
            with self._lock:
                m.in_use -= 1
            self._touch(m)

    def _stream(self, m: _Model, layers: list[int]) -> None:
        try:
            with m.lock:
                for i in layers:
                    self._load_layer(m, i)
        finally:
            for i in layers:  # wake waiters even on failure; the hook sees region None and raises
                m.ready[i].set()

    def _touch(self, m: _Model) -> None:
        m.last_used = time.monotonic()

    # -- eviction -----------------------------------------------------------------------------

    def _victims(self, arena_only: bool) -> Iterator[tuple[_Model, int]]:
        """(model, layer) in eviction order: LRU idle models first, each from its last layer back."""
        with self._lock:
            models = sorted((m for m in self._models.values() if m.in_use == 0), key=lambda m: m.last_used)
        for m in models:
            for i in range(len(m.table.entries) - 1, -1, -1):
                region = m.table.entries[i].region
                if region is not None and (not arena_only or region == "arena"):
                    yield m, i

    def _evict_layer(self, m: _Model, i: int) -> int:
        entry = m.table.entries[i]
        region = entry.region
        self.copier.retire(entry.tensors, m.events.pop(i, None))  # a copy may still be writing it
        m.table.unbind(i)
        m.ready[i].clear()
        self.evictions.append((m.key, i))
        if region == "arena":
            block = m.arena_blocks.pop(i)
            self.arena.free(block)
            return block.size
        self.budget.release_weights(entry.nbytes)
        return entry.nbytes

    def evict(self, nbytes: int) -> int:
        """Budget reclaimer: evict framework-region layers until `nbytes` are freed; returns bytes freed."""
        freed = 0
        with self._lock:
            for m, i in list(self._victims(arena_only=False)):
                if freed >= nbytes:
                    break
                if m.table.entries[i].region == "framework":
                    freed += self._evict_layer(m, i)
        return freed

    def evict_arena(self, nbytes: int) -> int:
        """Arena pressure hook (TensorStore.on_pressure): give arena-resident layers back."""
        freed = 0
        with self._lock:
            for m, i in list(self._victims(arena_only=True)):
                if freed >= nbytes:
                    break
                freed += self._evict_layer(m, i)
        return freed

    def drop(self, key: str) -> None:
        """Evict every layer of `key` (host and disk copies stay)."""
        m = self._models[key]
        with self._lock:
            for i in range(len(m.table.entries) - 1, -1, -1):
                if m.table.entries[i].region is not None:
                    self._evict_layer(m, i)

    def forget(self, key: str) -> None:
        """Drop `key` entirely: its layers, its host and disk copies, the model itself."""
        with self._lock:
            self.drop(key)
            del self._models[key]
        self.host.drop(key)


def build_layer_cache(
    budget: MemoryBudget,
    device: str,
    weights_dir: str | Path,
    host_bytes: int | None,
    arena: Arena | None = None,
    h2d_bandwidth: float | None = None,
) -> LayerCache:
    """An executor's layer cache on `device`: whole models in host memory up to `host_bytes` (pinned beside
    a GPU), past that on disk under `weights_dir`; `arena` lends weights room when the budget has none."""
    host = HostTier(DiskTier(weights_dir), host_bytes, pin=device.startswith("cuda"))
    return LayerCache(budget, host, HostToDevice(device, h2d_bandwidth), arena=arena)


def default_blocks(module: nn.Module) -> list[nn.Module]:
    """The blocks of the ModuleList that holds the most parameters (a transformer's blocks, a
    UNet's largest stage list); the whole module as one layer when it has none."""

    def size(m: nn.Module) -> int:
        return sum(p.numel() for p in m.parameters())

    lists = [m for m in module.modules() if isinstance(m, nn.ModuleList) and len(m)]
    if not lists:
        return [module]
    return list(max(lists, key=size))


def _padded(shape: torch.Size, dtype: torch.dtype) -> int:
    n = shape.numel() * torch.empty((), dtype=dtype).element_size()
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN
