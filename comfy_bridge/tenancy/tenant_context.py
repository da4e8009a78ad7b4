"""Which tenant the running code acts for.

A context variable, so that it follows a request through its handler and a prompt through the
engine (tasks and `ctx.run` copies inherit it) without threading a parameter through every route
and node. None means unscoped: the single-user server, or system code that sees everything.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

_CURRENT: contextvars.ContextVar[str | None] = contextvars.ContextVar("comfy_cluster_tenant", default=None)


def current() -> str | None:
    return _CURRENT.get()


def set_current(tenant: str | None) -> None:
    """Bind the calling context (e.g. the worker thread, per prompt) to `tenant`."""
    _CURRENT.set(tenant or None)


@contextmanager
def scoped(tenant: str | None) -> Iterator[None]:
    token = _CURRENT.set(tenant or None)
    try:
        yield
    finally:
        _CURRENT.reset(token)
