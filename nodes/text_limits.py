"""The longest text a model-free node may produce, as node bodies see it.

The server checks every text in a prompt against `max_text_chars` at the door; text nodes can still
multiply what came in (a regex replacement of every position, concatenating a text with itself again
and again), so they check what they are about to produce against the same limit. The queue worker binds
the limit of the tenant whose prompt runs (a context variable, so concurrent prompts keep their own);
code outside a bound prompt (the `run` command, tests) gets the server's default.
"""

from __future__ import annotations

import contextvars

DEFAULT_MAX_TEXT_CHARS = 100_000  # the server's default --max-text-chars (its config says why)
_UNBOUND = object()

_limit: contextvars.ContextVar[object] = contextvars.ContextVar("comfy_max_text_chars", default=_UNBOUND)


class TextTooLong(ValueError):
    """A node's text output would pass the server's text limit."""


def bind_max_text_chars(limit: int | None) -> contextvars.Token:
    """Set the limit for the prompt about to run in this context (None: no limit)."""
    return _limit.set(limit)


def unbind_max_text_chars(token: contextvars.Token) -> None:
    _limit.reset(token)


def max_text_chars() -> int | None:
    """The limit in force here; None when the operator turned it off."""
    limit = _limit.get()
    return DEFAULT_MAX_TEXT_CHARS if limit is _UNBOUND else limit  # type: ignore[return-value]


def check_length(node: str, length: int, at_least: bool = False) -> None:
    """Raise TextTooLong, naming `node` and the limit, when a text of `length` characters (or more,
    with `at_least`: building it stopped there) passes it."""
    limit = max_text_chars()
    if limit is not None and length > limit:
        size = f"{length:,} characters or more" if at_least else f"{length:,} characters"
        raise TextTooLong(
            f"{node}: the result would be {size}, more than the text limit "
            f"max_text_chars = {limit:,} (the server's --max-text-chars, or the tenant's own)"
        )
