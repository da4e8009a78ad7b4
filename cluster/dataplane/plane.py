"""One executor's data plane in one object: arena, tensor store, memory budget and layer cache.

What an executor does per invocation with it:

    plane = ExecutorDataPlane(executor_id, budget_bytes=..., arena_bytes=...)
    with plane.invocation() as inv:
        inputs = inv.inputs(metas, callbacks={"control"}, pending={"control": future})
        with plane.cache.use(model_key) as model, plane.budget.reserve(activation_bytes):
            outputs = fn.execute(model, inputs, params)
        handles = plane.publish(outputs, readers)
    # handles go to the head in Done; pulled inputs are freed and released when the block ends
"""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path
from typing import Any

import torch

from cluster.dataplane import nvshmem_team
from cluster.dataplane.arena import Arena, NvshmemArena, ShmArena
from cluster.dataplane.budget import MemoryBudget
from cluster.dataplane.handle import TensorHandle
from cluster.dataplane.segments import safe_prefix
from cluster.dataplane.tensor_store import LazyFetch, Scope, TensorStore
from cluster.weights.cache import build_layer_cache


class CallInputs:
    """The inputs of one ModelFn call: eager ones pulled now, callback ones as `LazyFetch`es."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope

    def inputs(
        self,
        handles: dict[str, TensorHandle],
        callbacks: set[str] = frozenset(),
        pending: dict[str, Future] | None = None,
        release: bool = True,
    ) -> dict[str, torch.Tensor | LazyFetch]:
        """`handles`: the tensors by input name; `pending`: callback inputs whose
        producer has not finished yet (a Future the executor completes when the head forwards the
        metadata). `release=False` reads without giving up a reference (someone else holds it)."""
        out: dict[str, torch.Tensor | LazyFetch] = {}
        for name, handle in handles.items():
            out[name] = (
                self.scope.lazy(handle, release=release) if name in callbacks else self.scope.fetch(handle, release)
            )
        for name, future in (pending or {}).items():
            out[name] = self.scope.lazy(future, release=release)
        return out


class ExecutorDataPlane:
    """`nvshmem`: the arena on the NVSHMEM heap of a team this process already joined; `team`: join that
    team first (a ticket from the head's `TeamPlan`). Otherwise the arena is host shared memory.
    `arena_stream`: the NVSHMEM arena's stream (default: a CUDA stream of its own)."""

    def __init__(
        self,
        owner: str,
        budget_bytes: int,
        arena_bytes: int,
        device: str = "cpu",
        weights_dir: str | Path | None = None,
        host_bytes: int | None = None,
        h2d_bandwidth: float | None = None,
        weights_in_arena: bool = True,
        nvshmem: bool = False,
        team: nvshmem_team.Ticket | None = None,
        arena_stream: Any = None,
    ) -> None:
        self.owner, self.prefix = owner, safe_prefix(owner)
        self.device = torch.device(device)
        self.weights_in_arena, self.arena_stream = weights_in_arena, arena_stream
        self.team = team
        self.epoch = 0  # arenas made since (reform): a new one's tables get a name of their own
        # arenas of teams left without their collectives (a member was gone): never freed, since a free is
        # collective; NVSHMEM stays initialised in this process, which so can never join a team again
        self.abandoned: list[Arena] = []
        if team is not None:
            nvshmem_team.join(team.uid, team.rank, team.nranks, self.device.index or 0)
        self.arena: Arena = self._new_arena(arena_bytes, nvshmem or team is not None)
        self.budget = MemoryBudget(budget_bytes, arena=self.arena.capacity)
        self.cache = build_layer_cache(
            self.budget,
            device,
            weights_dir or Path.home() / ".cache" / "comfy-cluster" / "weights",
            host_bytes,
            h2d_bandwidth=h2d_bandwidth,
            arena=self._weights_arena(),
        )
        self.store = self._new_store()

    def _new_arena(self, nbytes: int, nvshmem: bool) -> Arena:
        return NvshmemArena(nbytes, stream=self.arena_stream) if nvshmem else ShmArena(self.prefix, nbytes)

    def _weights_arena(self) -> Arena | None:
        # weights may live in the arena only where they compute: not a GPU's in host shm
        return self.arena if self.weights_in_arena and self.arena.device == self.device else None

    def _new_store(self) -> TensorStore:
        # each team generation, and each arena made again, gets reference tables of its own name (under the
        # executor's prefix, so cleanup still finds them): a handle from an earlier arena is stale, never misread
        prefix = (
            f"{self.prefix}t{self.team.generation}-"
            if self.team is not None
            else f"{self.prefix}e{self.epoch}-"
            if self.epoch
            else self.prefix
        )
        return TensorStore(self.arena, self.owner, prefix, on_pressure=self.cache.evict_arena)

    def can_join(self) -> bool:
        """Whether this process may still join an NVSHMEM team (none was left without finalising)."""
        return not self.abandoned

    def reform(self, team: nvshmem_team.Ticket | None, intact: bool = True) -> None:
        """Leave the current NVSHMEM team (if any) and join `team`, or go back to shared memory (None).
        The arena's tensors and the weights that lived in it are gone.

        `intact`: every member of the current team is alive and calls this too, so the old arena is freed
        and NVSHMEM finalised together (both are collective: a member that is gone would hang the others
        for ever). Otherwise the old team is abandoned: its arena is kept unfreed and NVSHMEM is not
        finalised, so this process cannot join another team (a second init without finalize is undefined
        behaviour in NVSHMEM) and `team` must be None. A team of one is always left cleanly. `join` returns
        once every member of the new team has joined."""
        clean = intact or self.team is None or self.team.nranks == 1
        if team is not None and not (clean and self.can_join()):
            raise RuntimeError("this process left an NVSHMEM team without finalising it: it cannot join another")
        capacity = self.arena.capacity
        served, secret = self.store.addr, self.store.secret  # its data socket goes on, at the same address
        self.cache.evict_arena(capacity)
        self.store.close()
        self._leave(clean)
        self.team = team
        if team is not None:
            nvshmem_team.join(team.uid, team.rank, team.nranks, self.device.index or 0)
        self.arena = self._new_arena(capacity, team is not None)
        self.cache.arena = self._weights_arena()
        self.epoch += 1
        self.store = self._new_store()
        self.store.secret = secret
        if served:
            ip, port = served[len("tcp://") :].rsplit(":", 1)
            self.store.serve(ip.strip("[]"), secret, int(port))

    def _leave(self, clean: bool) -> None:
        """Close the arena and leave the team: with its collectives (`clean`), or abandoning both."""
        if self.team is None or clean:
            self.arena.close()
            if self.team is not None:
                nvshmem_team.leave()
        else:
            self.abandoned.append(self.arena)

    def invocation(self) -> _CallInputsContext:
        """One ModelFn call's inputs, on this executor's device (`publish` copies outputs back)."""
        return _CallInputsContext(self.store, None if self.device.type == "cpu" else self.device)

    def publish(
        self, outputs: dict[str, torch.Tensor | None], readers: dict[str, int] | int = 1
    ) -> dict[str, TensorHandle]:
        """Copy outputs into the arena (None outputs are skipped); readers per output or for all."""
        return {
            k: self.store.publish(t, readers if isinstance(readers, int) else readers.get(k, 1))
            for k, t in outputs.items()
            if t is not None
        }

    def memory_used(self) -> int:
        return self.budget.used

    def close(self) -> None:
        """The process is ending: an NVSHMEM team's members are not ending with it (a collective free or
        finalize would wait for them for ever), so its arena is abandoned unless the team is of one."""
        self.store.close()
        self._leave(self.team is not None and self.team.nranks == 1)


class _CallInputsContext:
    def __init__(self, store: TensorStore, device: torch.device | None) -> None:
        self._scope = store.scope(device)

    def __enter__(self) -> CallInputs:
        return CallInputs(self._scope)

    def __exit__(self, *exc) -> None:
        self._scope.close()
