"""`comfy-cluster run` runs a prompt's event loop on the ModelFn thread (cluster.local.run_on_compute)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from cluster.local import COMPUTE_THREAD, SharedCompute, run_on_compute


def test_the_loop_and_executor_jobs_run_on_the_compute_thread():
    async def main() -> tuple[str, str]:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(SharedCompute())
        in_executor = await loop.run_in_executor(None, lambda: threading.current_thread().name)
        return threading.current_thread().name, in_executor

    loop_thread, job_thread = run_on_compute(main)
    assert loop_thread.startswith(COMPUTE_THREAD)
    assert job_thread == loop_thread  # inline, not queued behind the loop itself (that would deadlock)


def test_errors_reach_the_caller_and_the_thread_keeps_serving():
    async def fails() -> None:
        raise ValueError("node 3: bad input")

    with pytest.raises(ValueError, match="node 3"):
        run_on_compute(fails)

    async def ok() -> int:
        return 7

    assert run_on_compute(ok) == 7


def test_tasks_a_program_leaves_running_are_cancelled_when_it_returns():
    seen: list[str] = []

    async def leaves_a_task() -> None:
        async def forever() -> None:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                seen.append("cancelled")
                raise

        asyncio.get_running_loop().create_task(forever())
        await asyncio.sleep(0)

    run_on_compute(leaves_a_task)
    assert seen == ["cancelled"]


def test_context_variables_do_not_leak_between_programs():
    import contextvars

    var: contextvars.ContextVar[str] = contextvars.ContextVar("probe", default="unset")

    async def sets() -> None:
        var.set("first prompt")

    async def reads() -> str:
        return var.get()

    run_on_compute(sets)
    assert run_on_compute(reads) == "unset"
