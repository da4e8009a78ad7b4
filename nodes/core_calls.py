"""Core node functions called from node packs' own code, as in ComfyUI.

Our core node functions are `async def` (their bodies await ModelFn calls), while ComfyUI's are plain
functions: UltimateSDUpscale, Impact Pack, Inspire and others call `VAEEncode().encode(vae, pixels)` or
`nodes.common_ksampler(...)` from their synchronous node code and unpack the tuple. `both_ways` makes such a
function answer either caller:

- from synchronous code (a sync pack node runs in a worker thread, or whole on an executor) the call
  returns the result: the coroutine runs on the prompt's event loop (`ENGINE_LOOP`, set by the engine for
  the node it calls) while this thread waits, or, where no prompt loop is known (an executor, a script),
  on a loop of this thread's own;
- from a running event loop (the engine, a pack's `async def` node) it returns the coroutine to await
  (a `_Pending`, as outside any node call: scripts and tests still `asyncio.run` it).

Synchronous code that runs on the event loop itself cannot wait for the loop it blocks: there the
coroutine comes back, and using it as the tuple raises an error saying so.
"""

from __future__ import annotations

import asyncio
import collections.abc
import contextvars
import functools
import types
from collections.abc import Callable, Coroutine
from typing import Any

# The event loop of the prompt whose node is running; the engine sets it in each node call's context, so
# the worker thread that runs a sync node reads it too.
ENGINE_LOOP: contextvars.ContextVar[asyncio.AbstractEventLoop | None] = contextvars.ContextVar(
    "comfy_cluster_engine_loop", default=None
)
# True while a node function runs (the engine's call, or a pack node run whole on an executor): there a sync
# call returns the result itself, as ComfyUI's does. Elsewhere (scripts, tests) it returns a `_Pending`,
# which `asyncio.run` and `await` take as before and which runs when read as the result.
IN_NODE_CALL: contextvars.ContextVar[bool] = contextvars.ContextVar("comfy_cluster_in_node_call", default=False)


def _in_running_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def run_from_sync(coro: Coroutine) -> Any:
    """Wait, in this thread (which runs no event loop), for `coro` to finish; return its result."""
    loop = ENGINE_LOOP.get()
    if loop is not None and loop.is_running():
        # Another thread's loop (this one runs none), which awaits this thread's node without blocking on it.
        # The contextvars of this thread travel with the call (call_soon_threadsafe copies them).
        return asyncio.run_coroutine_threadsafe(coro, loop).result()
    return asyncio.run(coro)


class _Pending(collections.abc.Coroutine):
    """The coroutine of a core node call not run at once: awaitable and schedulable as it is; read as the
    result (unpacked, indexed) from a thread without a running loop it runs then, and on a running loop it
    raises a clear error instead of 'cannot unpack non-iterable coroutine object'."""

    _UNSET = object()

    def __init__(self, coro: Coroutine, name: str) -> None:
        self._coro, self._name, self._result = coro, name, self._UNSET

    def send(self, value: Any) -> Any:
        return self._coro.send(value)

    def throw(self, *args: Any) -> Any:
        return self._coro.throw(*args)

    def close(self) -> None:
        self._coro.close()

    def __await__(self) -> Any:
        return self._coro.__await__()

    def _value(self) -> Any:
        if self._result is self._UNSET:
            if _in_running_loop():
                self._coro.close()
                raise RuntimeError(
                    f"{self._name} was called from synchronous code running on the event loop: its result needs "
                    "that loop, which this code blocks. Await it (`await ...`) from async code, or call it from a "
                    "sync node (which runs in a worker thread)"
                )
            self._result = run_from_sync(self._coro)
        return self._result

    def __iter__(self) -> Any:
        return iter(self._value())

    def __getitem__(self, key: Any) -> Any:
        return self._value()[key]

    def __len__(self) -> int:
        return len(self._value())


class _BothWays:
    """The wrapped async function, called either way (see the module docstring). It keeps the function's
    `__code__`, so `inspect.iscoroutinefunction` still answers True and the engine awaits it as before."""

    def __init__(self, fn: Callable[..., Coroutine]) -> None:
        functools.update_wrapper(self, fn)
        self.__code__ = fn.__code__
        self.__defaults__ = fn.__defaults__
        self.__kwdefaults__ = fn.__kwdefaults__

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        return self if obj is None else types.MethodType(self, obj)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        coro = self.__wrapped__(*args, **kwargs)
        if IN_NODE_CALL.get() and not _in_running_loop():
            return run_from_sync(coro)
        return _Pending(coro, self.__qualname__)


def both_ways(fn: Callable[..., Coroutine]) -> Callable[..., Any]:
    """`fn` (an `async def`) callable from sync code as a plain function and from async code as before."""
    return fn if isinstance(fn, _BothWays) else _BothWays(fn)


def wrap_node_class(cls: type) -> None:
    """Make the node function (`FUNCTION`) of core V1 node class `cls` callable both ways, in place, so every
    reference to the class (`nodes.X`, `NODE_CLASS_MAPPINGS`, `comfy_extras`) sees it."""
    name = getattr(cls, "FUNCTION", None)
    for klass in cls.__mro__:
        fn = vars(klass).get(name) if isinstance(name, str) else None
        if fn is not None:
            if isinstance(fn, types.FunctionType) and asyncio.iscoroutinefunction(fn):
                setattr(klass, name, both_ways(fn))
            return
