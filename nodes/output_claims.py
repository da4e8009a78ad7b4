"""Exactly-once output files: a prompt re-run after its head died writes over what the dead run wrote.

A prompt that was running when the head was killed goes back on the durable queue and runs again on
restart. ComfyUI names outputs "<stem>_<counter>_.png" with the counter one past the highest on disk,
so the re-run would take the next counter and the dead run's files would stay beside the new ones.
Instead every name a prompt's node takes is claimed in a book (the durable store, under the prompt's
queue row) with a key that is the same in every run of the prompt: the node id, its list index and how
many names that node took before in this run. A re-run finds the dead run's claim and reuses its folder,
stem and counter. A new claim also skips the counters that other running prompts claimed but have not
written yet, so concurrent prompts never share a name either.

Files are written to a hidden temporary name and renamed into place (`write_atomic`), so a kill leaves
either the whole file or none, never a truncated image under the final name.
"""

from __future__ import annotations

import contextvars
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Claim:
    folder: str
    stem: str
    counter: int


class ClaimBook(Protocol):
    def claim_output(self, task: int, key: str, folder: str, stem: str, counter: int, count: int) -> Claim:
        """The claim recorded under (task, key); else record and return (folder, stem, c) with c at or past
        `counter` and past every counter other tasks claimed on folder/stem (`count` counters each)."""


@dataclass
class _Binding:
    book: ClaimBook
    task: int
    node: Callable[[], str]  # the running node's key, the same in every run of the prompt
    taken: dict[str, int]
    lock: threading.Lock


_binding: contextvars.ContextVar[_Binding | None] = contextvars.ContextVar("comfy_output_claims", default=None)


def bind(book: ClaimBook | None, task: int, node: Callable[[], str]) -> contextvars.Token:
    """Claim the names of the prompt about to run in this context (queue row `task`) in `book`; None
    (a queue that does not survive a restart) keeps ComfyUI's rule. `node()` names the node running
    when a claim is made (the engine knows; node code does not)."""
    return _binding.set(None if book is None else _Binding(book, task, node, {}, threading.Lock()))


def unbind(token: contextvars.Token) -> None:
    _binding.reset(token)


def claim(folder: str, stem: str, counter: int, count: int = 1) -> Claim:
    """Where the running node writes its next `count` files: ComfyUI's (folder, stem, counter) found on
    disk, or what an earlier run of the same prompt claimed for this node."""
    binding = _binding.get()
    if binding is None:
        return Claim(folder, stem, counter)
    node = binding.node()
    with binding.lock:  # list items of one node may run concurrently
        n = binding.taken.get(node, 0)
        binding.taken[node] = n + 1
    return binding.book.claim_output(binding.task, f"{node}/{n}", folder, stem, counter, count)


def write_atomic(path: str | os.PathLike, write: Callable[[str], None]) -> None:
    """`write(tmp)` to a hidden name beside `path`, then rename it onto `path` in one step. The
    temporary name is fixed per path, so a re-run after a kill replaces the dead run's partial file."""
    folder, name = os.path.split(os.fspath(path))
    tmp = os.path.join(folder, f".{name}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
