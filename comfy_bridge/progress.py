"""Progress and interrupts as node bodies see them (ComfyUI's ProgressBar hook and interrupt flag).

The engine installs a hook per running node (a context variable, so concurrent prompts do not mix);
node code calls `report_progress` and `throw_if_interrupted` without knowing who listens.
"""
from __future__ import annotations

import contextvars
import threading
from typing import Any, Callable

ProgressHook = Callable[[int, int, Any], None]  # (value, total, preview) -> None

_hook: contextvars.ContextVar[ProgressHook | None] = contextvars.ContextVar("comfy_progress_hook", default=None)
_interrupt = threading.Event()


class InterruptProcessingException(Exception):
    """Raised inside a node when the user interrupted the running prompt."""


def set_progress_hook(hook: ProgressHook | None) -> contextvars.Token:
    return _hook.set(hook)


def reset_progress_hook(token: contextvars.Token) -> None:
    _hook.reset(token)


def report_progress(value: int, total: int, preview: Any = None) -> None:
    hook = _hook.get()
    if hook is not None:
        hook(value, total, preview)


def interrupt(value: bool = True) -> None:
    """Ask the running node to stop at its next check (or clear the request)."""
    _interrupt.set() if value else _interrupt.clear()


def interrupt_requested() -> bool:
    return _interrupt.is_set()


def throw_if_interrupted() -> None:
    if _interrupt.is_set():
        _interrupt.clear()
        raise InterruptProcessingException()
