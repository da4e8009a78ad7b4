"""The runtime that sends ModelFn calls to the cluster: `call` builds the call's one typed message
(cluster.call.ModelFnCall), makes its inputs available in the data plane (the producer's handle when an
input is an unmodified output of an earlier call, else a copy in this process's arena), submits one
invocation carrying that message to the head under the request's tenant and id,
waits for it, and pulls private copies of the outputs from the executor's arena. A call the head
may batch with other requests' (its model's batch size above 1) carries a batch tag
(cluster.scheduling.batching.batch_tag); computing it is skipped otherwise.

The engine binds one per prompt (`runtime.bind(tenant, prompt_id)` then `use_runtime(...)`). The
caller holds one reference to every input until the call returns, so re-runs can read them again.
If outputs vanish before they are read (their executor was lost right after finishing), or a
forwarded input's producer is lost before the consumer read it, the invocation is run again with
the caller's own copies: ModelFns are deterministic, so the re-run gives the same tensors.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import uuid
from typing import Any

import torch

from cluster.call import ModelFnCall, Params, pack, typed
from cluster.control.errors import ClusterError, InputLost
from cluster.control.head import Head
from cluster.control.results import Result
from cluster.dataplane.caller_store import CallerStore, caller_store
from cluster.dataplane.handle import TensorHandle
from cluster.dataplane.segments import SegmentError
from cluster.modelfn import get_model_fn
from cluster.refs import ModelRef
from cluster.runtime import Runtime
from cluster.scheduling.batching import batch_tag, batchable
from cluster.scheduling.costs import remaining_critical_path, shape_signature


def _discard(store: CallerStore, future: cf.Future) -> None:
    if not future.cancelled() and future.exception() is None:
        for meta in future.result().outputs.values():
            store.release(meta)


class ClusterRuntime(Runtime):
    def __init__(
        self,
        head: Head,
        tenant: str = "default",
        request_id: str | None = None,
        deadline_s: float | None = None,
        max_reads: int = 3,
    ) -> None:
        self.head = head
        self.tenant = tenant
        self.request_id = request_id or uuid.uuid4().hex
        self.deadline_s = deadline_s
        self.max_reads = max_reads

    def bind(self, tenant: str, prompt_id: str) -> ClusterRuntime:
        """The same cluster, charging `tenant` and grouping calls under `prompt_id` (the head's request)."""
        return ClusterRuntime(self.head, tenant, prompt_id, self.deadline_s, self.max_reads)

    def idle_executors(self) -> int:
        return self.head.idle_executors()

    @property
    def store(self) -> CallerStore:
        store = caller_store()
        self.head.watch_lost(store.drop_peer)
        ip = self.head.data_ip
        if ip is not None:  # executors elsewhere read the caller's tensors over its data socket
            store.store.serve(ip, self.head.secret)
        return store

    def _batch_tag(
        self, fn: str, model: ModelRef | None, inputs: dict[str, torch.Tensor | None], params: Params
    ) -> tuple[str | None, int]:
        if model is None or self.head.batch_size(model.key) <= 1 or not batchable(fn):
            return None, 1
        return batch_tag(fn, model, inputs, params)

    def _submit(
        self,
        call: ModelFnCall,
        model: ModelRef | None,
        inputs: dict[str, torch.Tensor | None],
        params: Params,
        handles: dict[str, TensorHandle],
        tag: tuple[str | None, int],
        spread: bool = False,
    ) -> cf.Future:
        key = model.key if model is not None else ""
        shapes = shape_signature(inputs)
        fn = call.fn
        return self.head.submit(
            tenant=self.tenant,
            request=self.request_id,
            fn=fn,
            model_key=key,
            call=call,
            inputs=dict(handles),
            nulls=[k for k, v in inputs.items() if v is None],
            shapes=shapes,
            remaining_s=remaining_critical_path(fn, inputs, params, self.head.costs, key, shapes),
            deadline_s=self.deadline_s,
            batch_key=tag[0],
            batch_size=tag[1],
            spread=spread,
        )

    def _read(self, store: CallerStore, result: Result) -> dict[str, torch.Tensor | None]:
        out: dict[str, torch.Tensor | None] = {}
        try:
            for k, meta in result.outputs.items():
                out[k] = store.pull(meta)
        finally:
            # the reference each output was published with is now owned by its pulled copy
            for k, meta in result.outputs.items():
                if k not in out:
                    store.release(meta)
        out.update({k: None for k in result.nulls})
        return out

    async def call(
        self,
        fn: str,
        model: ModelRef | None,
        inputs: dict[str, torch.Tensor | None],
        params: Params | dict[str, Any] | None = None,
        *,
        spread: bool = False,
    ) -> dict[str, torch.Tensor]:
        params = typed(get_model_fn(fn).Params, params)
        call = pack(fn, model, params)  # the call's one message, for every attempt
        store = self.store
        store.collect()
        tensors = {k: v for k, v in inputs.items() if v is not None}
        handles = {k: store.hold(v, set(self.head.executors)) for k, v in tensors.items()}
        tag = self._batch_tag(fn, model, inputs, params)
        try:
            for attempt in range(self.max_reads):
                try:
                    future = self._submit(call, model, inputs, params, handles, tag, spread)
                    try:
                        result = await self.head.result(future)
                    except asyncio.CancelledError:
                        # nobody will read what it produces: give its outputs' references back
                        future.add_done_callback(lambda f: _discard(store, f))
                        raise
                    return self._read(store, result)
                except (SegmentError, InputLost) as e:
                    if attempt + 1 == self.max_reads:
                        raise ClusterError(f"data of {fn!r} was lost {self.max_reads} times: {e}") from None
                    # a producer was lost: send our own copies of the inputs it held
                    for k, h in list(handles.items()):
                        if h.owner != store.owner:
                            store.release(h)
                            handles[k] = store.store.publish(tensors[k], readers=1)
        finally:
            for h in handles.values():
                store.release(h)
        raise AssertionError("unreachable")

    def call_sync(
        self,
        fn: str,
        model: ModelRef | None,
        inputs: dict[str, torch.Tensor | None],
        params: Params | dict[str, Any] | None = None,
    ) -> dict[str, torch.Tensor]:
        """`call` for code without an event loop (scripts, benchmarks)."""
        return asyncio.run(self.call(fn, model, inputs, params))

    def cancel(self, reason: str = "interrupted") -> None:
        """Fail this request's queued invocations (ComfyUI's /interrupt)."""
        self.head.cancel_request(self.request_id, reason)
