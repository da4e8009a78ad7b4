"""An exception a pack node raised on an executor, carried back to the head and raised there as itself.

ComfyUI reports a failing node with the exception's own type, message and traceback (`execution_error`).
A node run on an executor is one invocation; if its exception escaped the ModelFn the head would see an
executor failure (`cluster.control.head.ModelFnError`) and cancel the request. So the executor catches what the
pack raised and returns it as the invocation's result; the head raises it again: the same exception
object when it can be unpickled there, else one of a stand-in class with the same module, name and message.
The executor's frames travel as formatted lines and follow the head's in the reported traceback.
"""

from __future__ import annotations

import pickle
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# Set on the exception raised on the head: the node's frames as `traceback.format_tb` lines.
REMOTE_TRACEBACK = "comfy_cluster_remote_traceback"


@dataclass(frozen=True)
class Raised:
    module: str
    qualname: str
    message: str
    traceback: list[str]
    pickled: bytes | None  # the exception itself, when it pickles


def capture(exc: BaseException) -> Raised:
    """What the head needs to raise `exc` again (executor side)."""
    cls = type(exc)
    try:
        pickled: bytes | None = pickle.dumps(exc, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # holds a lock, a generator, a local class: the stand-in carries type and text
        pickled = None
    return Raised(cls.__module__, cls.__qualname__, str(exc), traceback.format_tb(exc.__traceback__), pickled)


class PackNodeException(Exception):
    """Base of the stand-ins for a pack's exception that could not be rebuilt on the head."""


def _stand_in(raised: Raised) -> BaseException:
    # named as the original, so execution_error's exception_type is the pack's own
    cls = type(
        raised.qualname.rpartition(".")[2],
        (PackNodeException,),
        {"__module__": raised.module, "__qualname__": raised.qualname},
    )
    return cls(raised.message)


def rebuild(raised: Raised, loads: Callable[[bytes], Any]) -> BaseException:
    """The exception to raise on the head. `loads` unpickles, importing the pack that defines its class."""
    exc: BaseException | None = None
    if raised.pickled is not None:
        try:
            exc = loads(raised.pickled)
        except Exception:  # its class takes other constructor arguments than it pickles, or is gone here
            exc = None
    if not isinstance(exc, BaseException):
        exc = _stand_in(raised)
    setattr(exc, REMOTE_TRACEBACK, list(raised.traceback))
    return exc
