"""Interrupts are per prompt: interrupting one of two bound prompts leaves the other running; an
interrupt with no prompt id reaches every running prompt; unbound code uses the process-wide flag."""

from __future__ import annotations

import contextvars

import pytest

from nodes import progress


def _in_prompt(prompt_id: str):
    """A context bound to `prompt_id`, as the queue worker binds each running prompt."""
    ctx = contextvars.copy_context()
    ctx.run(progress.bind_prompt, prompt_id)
    return ctx


def _raises(ctx) -> bool:
    try:
        ctx.run(progress.throw_if_interrupted)
    except progress.InterruptProcessingException:
        return True
    return False


def test_interrupting_one_prompt_spares_the_other():
    a, b = _in_prompt("a"), _in_prompt("b")
    progress.interrupt(prompt_id="a")
    assert _raises(a) and not _raises(b)
    assert not _raises(a)  # consumed


def test_interrupt_without_id_reaches_every_prompt():
    a, b = _in_prompt("a2"), _in_prompt("b2")
    progress.interrupt()
    assert _raises(a) and _raises(b)
    progress.interrupt(False)


def test_an_interrupt_before_binding_is_kept_for_the_prompt():
    progress.interrupt(prompt_id="early")  # handed out by the queue, not yet bound
    ctx = _in_prompt("early")
    ctx.run(progress.clear_interrupt)  # what the engine does as the prompt starts
    assert _raises(ctx)


def test_unbound_code_uses_the_process_flag():
    progress.interrupt(prompt_id="not-bound-yet")  # held for that prompt, not for unbound code
    progress.throw_if_interrupted()
    progress.interrupt()
    with pytest.raises(progress.InterruptProcessingException):
        progress.throw_if_interrupted()
