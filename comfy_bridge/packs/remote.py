"""Head side of running a pack's node: in this process (no cluster, as ComfyUI does) or whole on an
executor as one `pack_node` invocation when the prompt's runtime is a cluster.

Either way the node sees MODEL/CLIP/VAE proxies and errors name its pack. On the cluster the
invocation has a deadline (`PACK_DEADLINE_S`): a pack that hangs fails its prompt and its executor
is replaced; one that crashes its executor is re-run elsewhere and then fails; the head lives on.

An async node function (`async def`) runs in this process on the cluster too: ComfyUI awaits it on the
prompt's event loop beside the prompt's other async nodes, and API nodes and I/O-bound pack nodes rely
on that concurrency, while an executor runs one invocation at a time (three such nodes would take the
sum of their waits). It runs in the prompt worker's thread, never on the HTTP loop, and on the cluster
under the same deadline (a coroutine that never yields cannot be cut short there, as in ComfyUI).
"""

from __future__ import annotations

import asyncio
import copy
import functools
import inspect
import sys
from collections.abc import Callable
from typing import Any

from cluster.runtime import runtime
from comfy_bridge.packs import events, node_failure, node_files, transport
from comfy_bridge.packs.origin import PackOrigin, origin_of, reset_running, set_running
from comfy_bridge.packs.proxies import wrap_inputs
from nodes.workspace import active

PACK_DEADLINE_S = 600.0


def _cluster_runtime(rt: Any) -> bool:
    module = sys.modules.get("cluster.cluster_runtime")  # not imported: no cluster runtime can exist
    return module is not None and isinstance(rt, module.ClusterRuntime)


def _ids(unique_id: str, prompt_id: str) -> dict[str, Any]:
    from comfy_bridge.compat.server import PromptServer

    server = PromptServer.instance
    return {"node_id": unique_id, "prompt_id": prompt_id, "client_id": getattr(server, "client_id", None)}


async def _run_remote(origin: PackOrigin, function: str, hidden: dict | None, ids: dict, kwargs: dict) -> Any:
    from cluster.dataplane.remote import host_id
    from comfy_bridge.packs.pack_node import RESULT, pack_source_digest, workspace_snapshot

    rt = copy.copy(runtime())
    rt.deadline_s = PACK_DEADLINE_S if rt.deadline_s is None else min(rt.deadline_s, PACK_DEADLINE_S)
    try:
        blob, tensors = transport.dumps((kwargs, hidden))
    except Exception as e:
        raise TypeError(
            f"node pack {origin.pack!r}, node {origin.node_id!r}: its inputs cannot be sent to an "
            f"executor ({type(e).__name__}: {e})"
        ) from e
    params = {
        "origin": origin,
        "function": function,
        "args": blob,
        "ids": ids,
        "workspace": workspace_snapshot(),
        # an executor on another machine keeps its workspace and checks its copy of the pack
        "host_id": host_id(),
        "pack_digest": pack_source_digest(origin.path),
    }
    out = await rt.call("pack_node", None, tensors, params)
    result, recorded, files, raised = transport.loads(transport.tensor_to_bytes(out.pop(RESULT)), out)
    if files:  # saved on another machine: written where the result names them, in this workspace
        node_files.write_named(files, active())
    events.replay(recorded)
    if raised is not None:
        raise node_failure.rebuild(raised, transport.loads_plain)
    return result


def route(obj: Any, func: str, hidden: dict | None, fn: Callable, unique_id: str, prompt_id: str) -> Callable:
    """The callable the engine runs for node function `func`: `fn` itself for core nodes; for pack nodes
    `fn` with proxies and the pack named in errors, or (a sync function) a call to the cluster when one
    runs the prompt."""
    cls = obj if isinstance(obj, type) else type(obj)
    origin = origin_of(cls)
    if origin is None or func != getattr(cls, "FUNCTION", "execute"):
        return fn
    on_cluster = _cluster_runtime(runtime())
    if inspect.iscoroutinefunction(fn):  # here even on the cluster: see the module's docstring
        deadline = PACK_DEADLINE_S if on_cluster else None

        @functools.wraps(fn)
        async def local_async(**kwargs: Any) -> Any:
            token = set_running(origin)
            try:
                async with asyncio.timeout(deadline) as limit:
                    return await fn(**wrap_inputs(kwargs))
            except TimeoutError as e:
                if not limit.expired():  # the node's own TimeoutError
                    raise
                raise TimeoutError(
                    f"node pack {origin.pack!r}, node {origin.node_id!r}: its async function "
                    f"did not finish within the {deadline:g} s deadline"
                ) from e
            finally:
                reset_running(token)

        return local_async
    if on_cluster:
        ids = _ids(unique_id, prompt_id)

        async def remote(**kwargs: Any) -> Any:
            return await _run_remote(origin, func, hidden, ids, kwargs)

        return remote

    @functools.wraps(fn)
    def local(**kwargs: Any) -> Any:
        token = set_running(origin)
        try:
            return fn(**wrap_inputs(kwargs))
        finally:
            reset_running(token)

    return local
