"""Running a prompt: ComfyUI's execution loop, messages and error reports."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
import traceback
from enum import Enum
from typing import Any, Protocol

from comfy_bridge.execution.caching import CacheSet, Signer
from comfy_bridge.execution.graph import DynamicPrompt, ExecutionList
from comfy_bridge.execution.graph_utils import ExecutionBlocker, is_link
from comfy_bridge.execution.node_call import (
    format_value,
    get_input_data,
    get_output_from_returns,
    map_node_over_list,
    merge_result_data,
    resolve_results,
)
from comfy_bridge.execution.nodeapi import custom_function, input_types, is_v3
from comfy_bridge.execution.progress_state import (
    ProgressRegistry,
    make_progress_hook,
    restore_progress_state,
    set_progress_state,
)
from comfy_bridge.packs.node_failure import REMOTE_TRACEBACK
from nodes import progress

log = logging.getLogger(__name__)


class MessageSink(Protocol):
    client_id: str | None
    last_node_id: str | None

    def send_sync(self, event: str | int, data: Any, sid: str | None = None) -> None: ...


class ExecutionResult(Enum):
    SUCCESS = 0
    FAILURE = 1
    PENDING = 2


class DuplicateNodeError(Exception):
    pass


def full_type_name(klass: type) -> str:
    """`RuntimeError` for builtins, `module.Qualname` otherwise (as ComfyUI reports exception types)."""
    return klass.__qualname__ if klass.__module__ == "builtins" else f"{klass.__module__}.{klass.__qualname__}"


class IsChangedCache:
    """IS_CHANGED / fingerprint_inputs results, once per node per prompt (NaN when it raises)."""

    def __init__(self, prompt_id: str, dynprompt: DynamicPrompt, registry: Any):
        self.prompt_id, self.dynprompt, self.registry = prompt_id, dynprompt, registry
        self.is_changed: dict[str, Any] = {}

    async def get(self, node_id: str) -> Any:
        if node_id in self.is_changed:
            return self.is_changed[node_id]
        node = self.dynprompt.get_node(node_id)
        class_def = self.registry.classes[node["class_type"]]
        name, fn = custom_function(class_def, "IS_CHANGED")
        if fn is None:
            self.is_changed[node_id] = False
            return False
        if "is_changed" in node:
            self.is_changed[node_id] = node["is_changed"]
            return node["is_changed"]
        # Constants only: linked inputs are deliberately passed as None.
        data, _, hidden = get_input_data(node["inputs"], class_def, node_id, None)
        try:
            values = await resolve_results(
                await map_node_over_list(self.prompt_id, node_id, class_def, data, name, hidden_inputs=hidden)
            )
            node["is_changed"] = [None if isinstance(v, ExecutionBlocker) else v for v in values]
        except Exception as ex:
            log.warning("WARNING: %s", ex)
            node["is_changed"] = float("NaN")
        self.is_changed[node_id] = node["is_changed"]
        return node["is_changed"]


def _includes_node_id(registry: Any, dynprompt: DynamicPrompt):
    """Nodes whose output depends on their id: NOT_IDEMPOTENT or a hidden UNIQUE_ID input."""
    memo: dict[str, bool] = {}

    def check(node_id: str) -> bool:
        class_type = dynprompt.get_node(node_id)["class_type"]
        if class_type not in memo:
            cls = registry.classes[class_type]
            hidden = input_types(cls).get("hidden", {}) or {}
            values = [v if isinstance(v, str) else (v[0] if v else None) for v in hidden.values()]
            memo[class_type] = bool(getattr(cls, "NOT_IDEMPOTENT", False)) or "UNIQUE_ID" in values
        return memo[class_type]

    return check


class _PromptRun:
    """State of one prompt run shared by the node executions."""

    def __init__(
        self,
        executor: PromptExecutor,
        dynprompt: DynamicPrompt,
        prompt_id: str,
        extra_data: dict,
        registry: ProgressRegistry,
    ):
        self.executor = executor
        self.server = executor.server
        self.caches = executor.caches
        self.classes = executor.registry.classes
        self.dynprompt = dynprompt
        self.prompt_id = prompt_id
        self.extra_data = extra_data
        self.progress = registry
        self.executed: set[str] = set()
        self.pending_subgraph_results: dict[str, list] = {}
        self.pending_async_nodes: dict[str, list] = {}
        self.execution_list: ExecutionList | None = None

    def class_of(self, class_type: str) -> type:
        return self.classes[class_type]

    async def execute(self, unique_id: str) -> tuple[ExecutionResult, dict | None, BaseException | None]:
        server, caches, dynprompt = self.server, self.caches, self.dynprompt
        real_node_id = dynprompt.get_real_node_id(unique_id)
        display_node_id = dynprompt.get_display_node_id(unique_id)
        parent_node_id = dynprompt.get_parent_node_id(unique_id)
        node = dynprompt.get_node(unique_id)
        inputs, class_type = node["inputs"], node["class_type"]
        class_def = self.classes[class_type]
        if caches.outputs.get(unique_id) is not None:
            if server.client_id is not None:
                cached_ui = caches.ui.get(unique_id) or {}
                server.send_sync(
                    "executed",
                    {
                        "node": unique_id,
                        "display_node": display_node_id,
                        "output": cached_ui.get("output"),
                        "prompt_id": self.prompt_id,
                    },
                    server.client_id,
                )
            self.progress.finish_progress(unique_id)
            return ExecutionResult.SUCCESS, None, None

        input_data_all = None
        try:
            if unique_id in self.pending_async_nodes:
                pending = self.pending_async_nodes.pop(unique_id)
                results = [r.result() if isinstance(r, asyncio.Task) else r for r in pending]
                output_data, output_ui, has_subgraph = get_output_from_returns(results, class_def)
            elif unique_id in self.pending_subgraph_results:
                output_data = merge_result_data(self._resolve_subgraph(unique_id), class_def)
                output_ui, has_subgraph = {}, False
            else:
                self.progress.start_progress(unique_id)
                input_data_all, missing, hidden = get_input_data(
                    inputs, class_def, unique_id, caches.outputs, dynprompt, self.extra_data
                )
                if server.client_id is not None:
                    server.last_node_id = display_node_id
                    server.send_sync(
                        "executing",
                        {"node": unique_id, "display_node": display_node_id, "prompt_id": self.prompt_id},
                        server.client_id,
                    )
                obj = caches.objects.get(unique_id)
                if obj is None:
                    obj = class_def()
                    caches.objects.set(unique_id, obj)
                if await self._needs_lazy_inputs(unique_id, obj, class_def, input_data_all, missing, hidden):
                    return ExecutionResult.PENDING, None, None
                returned = await map_node_over_list(
                    self.prompt_id,
                    unique_id,
                    obj,
                    input_data_all,
                    class_def.FUNCTION,
                    allow_interrupt=True,
                    execution_block_cb=lambda b: self._on_blocker(b, unique_id, class_type),
                    setup=lambda _i: progress.set_progress_hook(make_progress_hook(server, self.progress, unique_id)),
                    hidden_inputs=hidden,
                    in_thread=True,
                )
                if any(isinstance(r, asyncio.Task) and not r.done() for r in returned):
                    self._wait_for_tasks(unique_id, returned)
                    return ExecutionResult.PENDING, None, None
                output_data, output_ui, has_subgraph = get_output_from_returns(returned, class_def)
            if output_ui:
                caches.ui.set(
                    unique_id,
                    {
                        "meta": {
                            "node_id": unique_id,
                            "display_node": display_node_id,
                            "parent_node": parent_node_id,
                            "real_node_id": real_node_id,
                        },
                        "output": output_ui,
                    },
                )
                if server.client_id is not None:
                    server.send_sync(
                        "executed",
                        {
                            "node": unique_id,
                            "display_node": display_node_id,
                            "output": output_ui,
                            "prompt_id": self.prompt_id,
                        },
                        server.client_id,
                    )
            if has_subgraph:
                await self._expand(unique_id, output_data)
                return ExecutionResult.PENDING, None, None
            caches.outputs.set(unique_id, output_data)
        except progress.InterruptProcessingException as iex:
            log.info("Processing interrupted")
            return ExecutionResult.FAILURE, {"node_id": real_node_id}, iex
        except Exception as ex:
            typ, _, tb = sys.exc_info()
            formatted = (
                {}
                if input_data_all is None
                else {name: [format_value(x) for x in values] for name, values in input_data_all.items()}
            )
            log.error("!!! Exception during processing !!! %s", ex)
            log.error(traceback.format_exc())
            tips = ""
            if isinstance(ex, MemoryError) or "out of memory" in str(ex).lower():
                tips = (
                    "This error means you ran out of memory on your GPU.\n\nTIPS: If the workflow worked before "
                    "you might have accidentally set the batch_size to a large number."
                )
            return (
                ExecutionResult.FAILURE,
                {
                    "node_id": real_node_id,
                    "exception_message": f"{ex}\n{tips}",
                    "exception_type": full_type_name(typ),
                    # a pack node run on an executor: its own frames follow
                    "traceback": traceback.format_tb(tb) + getattr(ex, REMOTE_TRACEBACK, []),
                    "current_inputs": formatted,
                },
                ex,
            )
        self.progress.finish_progress(unique_id)
        self.executed.add(unique_id)
        return ExecutionResult.SUCCESS, None, None

    async def _needs_lazy_inputs(
        self, unique_id: str, obj: Any, class_def: type, data: dict, missing: dict, hidden: dict
    ) -> bool:
        """Ask check_lazy_status which unevaluated inputs it wants; schedule them and report True if any."""
        if is_v3(class_def):
            name, fn = custom_function(class_def, "check_lazy_status")
        else:
            name, fn = "check_lazy_status", getattr(obj, "check_lazy_status", None)
        if fn is None:
            return False
        wanted = await resolve_results(
            await map_node_over_list(
                self.prompt_id, unique_id, obj, data, name, allow_interrupt=True, hidden_inputs=hidden
            )
        )
        names = {n for r in wanted if isinstance(r, list) for n in r}
        needed = [n for n in names if isinstance(n, str) and (n not in data or n in missing)]
        for n in needed:
            self.execution_list.make_input_strong_link(unique_id, n)
        return bool(needed)

    def _on_blocker(self, block: ExecutionBlocker, unique_id: str, class_type: str) -> ExecutionBlocker:
        if block.message is None:
            return block
        self.server.send_sync(
            "execution_error",
            {
                "prompt_id": self.prompt_id,
                "node_id": unique_id,
                "node_type": class_type,
                "executed": list(self.executed),
                "exception_message": f"Execution Blocked: {block.message}",
                "exception_type": "ExecutionBlocked",
                "traceback": [],
                "current_inputs": [],
                "current_outputs": [],
            },
            self.server.client_id,
        )
        return ExecutionBlocker(None)

    def _wait_for_tasks(self, unique_id: str, returned: list) -> None:
        """Park the node until its async calls finish; the scheduler runs other ready nodes meanwhile."""
        self.pending_async_nodes[unique_id] = returned
        unblock = self.execution_list.add_external_block(unique_id)
        tasks = [r for r in returned if isinstance(r, asyncio.Task)]

        async def await_completion() -> None:
            await asyncio.gather(*tasks, return_exceptions=True)
            unblock()

        self.executor._background.add(t := asyncio.get_running_loop().create_task(await_completion()))
        t.add_done_callback(self.executor._background.discard)

    def _resolve_subgraph(self, unique_id: str) -> list:
        resolved = []
        for is_subgraph, result in self.pending_subgraph_results.pop(unique_id):
            if not is_subgraph:
                resolved.append(result)
                continue
            values = []
            for r in result:
                if is_link(r):
                    values.extend(self.caches.outputs.get(r[0])[r[1]])
                else:
                    values.append(r)
            resolved.append(tuple(values))
        return resolved

    async def _expand(self, unique_id: str, output_data: list) -> None:
        """Add the returned sub-graphs as ephemeral nodes; the node completes once their linked results exist."""
        cached_outputs, new_node_ids, new_output_ids, new_output_links = [], [], [], []
        for new_graph, node_outputs in output_data:
            if new_graph is None:
                cached_outputs.append((False, node_outputs))
                continue
            for node_id in new_graph:
                if self.dynprompt.has_node(node_id):
                    raise DuplicateNodeError(
                        f"Attempt to add duplicate node {node_id}. Ensure node ids are unique "
                        "and deterministic or use graph_utils.GraphBuilder."
                    )
            for node_id, node_info in new_graph.items():
                new_node_ids.append(node_id)
                self.dynprompt.add_ephemeral_node(
                    node_id, node_info, unique_id, node_info.get("override_display_id", unique_id)
                )
                if getattr(self.classes[node_info["class_type"]], "OUTPUT_NODE", False) is True:
                    new_output_ids.append(node_id)
            for value in node_outputs:
                if is_link(value):
                    new_output_links.append((value[0], value[1]))
            cached_outputs.append((True, node_outputs))
        children = set(new_node_ids)
        for cache in self.caches.all:
            sub = await cache.ensure_subcache_for(unique_id, children)
            sub.clean_unused()
        for node_id in new_output_ids:
            self.execution_list.add_node(node_id)
        for from_id, socket in new_output_links:
            self.execution_list.add_strong_link(from_id, socket, unique_id)
        self.pending_subgraph_results[unique_id] = cached_outputs


class PromptExecutor:
    """Runs prompts one at a time with caches that persist between prompts (ComfyUI's PromptExecutor)."""

    def __init__(
        self, registry: Any, server: MessageSink, cache_type: str = "classic", cache_size: int = 0, runtime: Any = None
    ):
        self.registry = registry
        self.server = server
        self.cache_type = cache_type
        self.cache_size = cache_size
        self.runtime = runtime
        self.history_result: dict = {"outputs": {}, "meta": {}}
        self._background: set[asyncio.Task] = set()
        self.reset()

    def reset(self) -> None:
        """Drop every cached output, UI and node instance (POST /free)."""
        self.caches = CacheSet(self.cache_type, self.cache_size)
        self.status_messages: list[tuple[str, dict]] = []
        self.success = True

    def add_message(self, event: str, data: dict, broadcast: bool) -> None:
        data = {**data, "timestamp": int(time.time() * 1000)}
        self.status_messages.append((event, data))
        if self.server.client_id is not None or broadcast:
            self.server.send_sync(event, data, self.server.client_id)

    def handle_execution_error(
        self, prompt_id: str, prompt: dict, current_outputs: set, executed: set, error: dict, ex: BaseException
    ) -> None:
        node_id = error["node_id"]
        class_type = prompt[node_id]["class_type"] if node_id in prompt else None
        if isinstance(ex, progress.InterruptProcessingException):
            self.add_message(
                "execution_interrupted",
                {"prompt_id": prompt_id, "node_id": node_id, "node_type": class_type, "executed": list(executed)},
                broadcast=True,
            )
        else:
            self.add_message(
                "execution_error",
                {
                    "prompt_id": prompt_id,
                    "node_id": node_id,
                    "node_type": class_type,
                    "executed": list(executed),
                    "exception_message": error["exception_message"],
                    "exception_type": error["exception_type"],
                    "traceback": error["traceback"],
                    "current_inputs": error["current_inputs"],
                    "current_outputs": list(current_outputs),
                },
                broadcast=False,
            )

    def _runtime_scope(self, prompt_id: str, extra_data: dict) -> contextlib.AbstractContextManager:
        if self.runtime is None:
            return contextlib.nullcontext()
        from cluster import runtime as runtime_mod

        rt = self.runtime.bind(extra_data.get("tenant", "default"), prompt_id)

        @contextlib.contextmanager
        def scope():
            token = runtime_mod.use_runtime(rt)
            try:
                yield
            finally:
                runtime_mod.restore_runtime(token)

        return scope()

    async def execute_async(
        self, prompt: dict, prompt_id: str, extra_data: dict | None = None, execute_outputs: list[str] | None = None
    ) -> None:
        extra_data = extra_data or {}
        progress.clear_interrupt()
        self.server.client_id = extra_data.get("client_id")
        self.status_messages = []
        self.success = True
        self.add_message("execution_start", {"prompt_id": prompt_id}, broadcast=False)
        with self._runtime_scope(prompt_id, extra_data):
            await self._run(prompt, prompt_id, extra_data, list(execute_outputs or []))

    async def _run(self, prompt: dict, prompt_id: str, extra_data: dict, execute_outputs: list[str]) -> None:
        dynprompt = DynamicPrompt(prompt)
        registry = ProgressRegistry(prompt_id, dynprompt, self.server)
        token = set_progress_state(registry)
        try:
            is_changed = IsChangedCache(prompt_id, dynprompt, self.registry)
            signer = Signer(dynprompt, is_changed.get, _includes_node_id(self.registry, dynprompt))
            for cache in self.caches.all:
                await cache.set_prompt(dynprompt, prompt.keys(), signer)
                cache.clean_unused()
            cached_nodes = [node_id for node_id in prompt if self.caches.outputs.get(node_id) is not None]
            self.add_message("execution_cached", {"nodes": cached_nodes, "prompt_id": prompt_id}, broadcast=False)
            run = _PromptRun(self, dynprompt, prompt_id, extra_data, registry)
            run.execution_list = ExecutionList(dynprompt, self.caches.outputs, run.class_of)
            current_outputs = self.caches.outputs.all_node_ids()
            for node_id in execute_outputs:
                run.execution_list.add_node(node_id)
            failed = False
            while not run.execution_list.is_empty():
                node_id, error, ex = await run.execution_list.stage_node_execution()
                if error is not None:
                    self.handle_execution_error(
                        prompt_id, dynprompt.original_prompt, current_outputs, run.executed, error, ex
                    )
                    failed = True
                    break
                result, error, ex = await run.execute(node_id)
                self.success = result != ExecutionResult.FAILURE
                if result == ExecutionResult.FAILURE:
                    self.handle_execution_error(
                        prompt_id, dynprompt.original_prompt, current_outputs, run.executed, error, ex
                    )
                    failed = True
                    break
                if result == ExecutionResult.PENDING:
                    run.execution_list.unstage_node_execution()
                else:
                    run.execution_list.complete_node_execution()
            if not failed:
                self.add_message("execution_success", {"prompt_id": prompt_id}, broadcast=False)
            self._collect_history()
            self.server.last_node_id = None
        finally:
            await self._cancel_stragglers()
            restore_progress_state(token)

    def _collect_history(self) -> None:
        outputs, meta = {}, {}
        for node_id in self.caches.ui.all_node_ids():
            info = self.caches.ui.get(node_id)
            if info is not None:
                outputs[node_id] = info["output"]
                meta[node_id] = info["meta"]
        self.history_result = {"outputs": outputs, "meta": meta}

    async def _cancel_stragglers(self) -> None:
        """Async node tasks still running after a failure are cancelled so they cannot outlive the prompt."""
        for task in list(self._background):
            task.cancel()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
