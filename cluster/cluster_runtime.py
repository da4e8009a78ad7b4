"""The runtime that sends ModelFn calls to the cluster: `call` writes the inputs into shared memory,
submits one invocation to the head under the request's tenant and id, waits for it, and copies the
outputs out of the executor's segment.

The engine binds one per prompt (`runtime.bind(tenant, prompt_id)` then `use_runtime(...)`). If the
outputs vanish before they are read (their executor was lost right after finishing), the invocation is
run again: ModelFns are deterministic, so the re-run gives the same tensors.
"""
from __future__ import annotations

import asyncio
import concurrent.futures as cf
import os
import pickle
import uuid
from typing import Any

import torch

from cluster import shm
from cluster.costs import remaining_critical_path, shape_signature
from cluster.head import ClusterError, Head, Result
from cluster.refs import ModelRef
from cluster.runtime import Runtime

_INPUT_PREFIX = shm.segment_prefix(f"c{os.getpid()}")


class ClusterRuntime(Runtime):
    def __init__(self, head: Head, tenant: str = "default", request_id: str | None = None,
                 deadline_s: float | None = None, max_reads: int = 3) -> None:
        self.head = head
        self.tenant = tenant
        self.request_id = request_id or uuid.uuid4().hex
        self.deadline_s = deadline_s
        self.max_reads = max_reads

    def bind(self, tenant: str, request_id: str) -> "ClusterRuntime":
        """The same cluster, charging `tenant` and grouping calls under `request_id`."""
        return ClusterRuntime(self.head, tenant, request_id, self.deadline_s, self.max_reads)

    def _submit(self, fn: str, model: ModelRef | None, inputs: dict[str, torch.Tensor | None],
                params: dict[str, Any], metas: dict) -> cf.Future:
        key = model.key if model is not None else ""
        shapes = shape_signature(inputs)
        return self.head.submit(
            tenant=self.tenant, request=self.request_id, fn=fn, model_key=key,
            payload=pickle.dumps((model, params), protocol=pickle.HIGHEST_PROTOCOL),
            inputs=metas, nulls=[k for k, v in inputs.items() if v is None], shapes=shapes,
            remaining_s=remaining_critical_path(fn, inputs, params, self.head.costs, key, shapes),
            deadline_s=self.deadline_s)

    @staticmethod
    def _read(result: Result) -> dict[str, torch.Tensor | None]:
        try:
            out: dict[str, torch.Tensor | None] = shm.read_tensors(result.outputs)
        finally:
            shm.unlink(meta.segment for meta in result.outputs.values())
        out.update({k: None for k in result.nulls})
        return out

    async def call(self, fn: str, model: ModelRef | None, inputs: dict[str, torch.Tensor | None],
                   params: dict[str, Any] | None = None) -> dict[str, torch.Tensor]:
        params = params or {}
        metas = shm.write_tensors(_INPUT_PREFIX, {k: v for k, v in inputs.items() if v is not None})
        try:
            for attempt in range(self.max_reads):
                result = await asyncio.wrap_future(self._submit(fn, model, inputs, params, metas))
                try:
                    return self._read(result)
                except shm.ShmError:
                    if attempt + 1 == self.max_reads:
                        raise ClusterError(f"outputs of {fn!r} were lost {self.max_reads} times") from None
        finally:
            shm.unlink(meta.segment for meta in metas.values())
        raise AssertionError("unreachable")

    def call_sync(self, fn: str, model: ModelRef | None, inputs: dict[str, torch.Tensor | None],
                  params: dict[str, Any] | None = None) -> dict[str, torch.Tensor]:
        """`call` for code without an event loop (scripts, benchmarks)."""
        return asyncio.run(self.call(fn, model, inputs, params))

    def cancel(self, reason: str = "interrupted") -> None:
        """Fail this request's queued invocations (ComfyUI's /interrupt)."""
        self.head.cancel_request(self.request_id, reason)
