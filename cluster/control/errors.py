"""Why an invocation could not produce its outputs: the errors a `Head.submit` future raises."""

from __future__ import annotations


class ClusterError(RuntimeError):
    """An invocation could not produce its outputs."""


class ModelFnError(ClusterError):
    """The ModelFn raised on its executor; the message carries the remote exception text."""

    def __init__(self, message: str, remote_traceback: str = "") -> None:
        super().__init__(message)
        self.remote_traceback = remote_traceback


class DeadlineExceeded(ClusterError, TimeoutError):
    """The invocation ran longer than its deadline."""


class ExecutorLost(ClusterError):
    """Every executor that ran the invocation was lost (`max_attempts` times)."""


class RequestCancelled(ClusterError):
    """The request was cancelled (or another of its invocations failed) before this one ran."""


class InputLost(ClusterError):
    """An input's producer was lost before the executor read it; the caller re-sends its own copy."""
