"""Progress and interrupts as node bodies see them (ComfyUI's ProgressBar hook and interrupt flag).

The engine installs a hook per running node (a context variable, so concurrent prompts do not mix);
node code calls `report_progress` and `throw_if_interrupted` without knowing who listens.
Interrupts are per prompt: the worker binds each running prompt to its own flag, so interrupting one
of several concurrent prompts leaves the others running; code outside a bound prompt (the `run`
command, tests) uses one process-wide flag.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from typing import Any

ProgressHook = Callable[[int, int, Any], None]  # (value, total, preview) -> None

_hook: contextvars.ContextVar[ProgressHook | None] = contextvars.ContextVar("comfy_progress_hook", default=None)
_interrupt = threading.Event()  # for code not bound to a prompt
_prompt_flags: dict[str, threading.Event] = {}
_early: set[str] = set()  # interrupted after the queue handed them out but before they were bound
_current_prompt: contextvars.ContextVar[str | None] = contextvars.ContextVar("comfy_prompt", default=None)
_lock = threading.Lock()


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


def bind_prompt(prompt_id: str) -> contextvars.Token:
    """Give the prompt about to run in this context its own interrupt flag."""
    flag = threading.Event()
    with _lock:
        if prompt_id in _early:
            _early.discard(prompt_id)
            flag.set()
        _prompt_flags[prompt_id] = flag
    return _current_prompt.set(prompt_id)


def unbind_prompt(token: contextvars.Token) -> None:
    prompt_id = _current_prompt.get()
    _current_prompt.reset(token)
    with _lock:
        _prompt_flags.pop(prompt_id, None)


def _flag() -> threading.Event:
    prompt_id = _current_prompt.get()
    return _prompt_flags.get(prompt_id, _interrupt) if prompt_id is not None else _interrupt


def interrupt(value: bool = True, prompt_id: str | None = None) -> None:
    """Ask running code to stop at its next check (or withdraw the request): one prompt, or every
    running prompt and unbound code when `prompt_id` is None."""
    with _lock:
        if prompt_id is not None and prompt_id not in _prompt_flags:
            # Taken off the queue but not bound yet: the flag is raised when it binds.
            _early.add(prompt_id) if value else _early.discard(prompt_id)
            return
        flags = [_prompt_flags[prompt_id]] if prompt_id is not None else [*_prompt_flags.values(), _interrupt]
    for flag in flags:
        flag.set() if value else flag.clear()


def clear_interrupt() -> None:
    """Unbound code (the `run` command) starts a prompt with no stale interrupt; a bound prompt's flag
    is new, and may already hold an interrupt that arrived before it was bound."""
    if _current_prompt.get() is None:
        _interrupt.clear()


def interrupt_requested() -> bool:
    return _flag().is_set()


def throw_if_interrupted() -> None:
    flag = _flag()
    if flag.is_set():
        flag.clear()
        raise InterruptProcessingException()
