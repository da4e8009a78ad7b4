"""ComfyUI's text nodes stay within the text limit and the regular-expression worker's bounds (issue 35,
item 1), while giving `re`'s own results (tests/nodes/fixtures/comfyui_0_3_64/string.json holds
ComfyUI's, checked by test_matches_real_comfyui.py)."""

from __future__ import annotations

import re
import time

import pytest

from nodes import regex_runner, text_limits
from nodes.library.string import CaseConverter, RegexExtract, RegexReplace, StringConcatenate, StringReplace
from nodes.text_limits import TextTooLong


@pytest.fixture
def limit():
    """Bind a text limit as the queue worker does for a prompt."""
    tokens = []

    def bind(chars: int | None) -> None:
        tokens.append(text_limits.bind_max_text_chars(chars))

    yield bind
    for token in reversed(tokens):
        text_limits.unbind_max_text_chars(token)


SUB_CASES = [
    ("", "-", "abc", 0, 0),
    (r"\d+", r"<\g<0>>", "a1b22c333", 0, 0),
    (r"(\d)(\w)", r"\2\1", "1a 2b 3c", 2, 0),
    ("(?P<n>x)|y", r"[\g<n>]", "xyxy", 0, 0),
    (r"^\s*", "> ", "  a\n b\nc", 0, re.MULTILINE),
    ("x*", "-", "abxxc", 0, 0),
    ("É", "e", "Éé", 0, re.IGNORECASE),
    (r"a.b", "_", "a\nb", 0, re.DOTALL),
    ("z", r"\1", "no match here", 0, 0),
    ("b", "\\n", "abc", 0, 0),
]


@pytest.mark.parametrize("pattern, repl, string, count, flags", SUB_CASES)
def test_regex_replace_gives_re_sub_result(pattern, repl, string, count, flags):
    node = RegexReplace()
    args = dict(
        case_insensitive=bool(flags & re.IGNORECASE),
        multiline=bool(flags & re.MULTILINE),
        dotall=bool(flags & re.DOTALL),
        count=count,
    )
    try:
        expected = re.sub(pattern, repl, string, count=count, flags=flags)
    except re.error as exc:  # re checks the template even where nothing matches: so does the node
        with pytest.raises(re.error) as got:
            node.execute(string, pattern, repl, **args)
        assert str(got.value) == str(exc)
        return
    assert node.execute(string, pattern, repl, **args) == (expected,)


def test_regex_replace_stops_building_at_the_limit(limit):
    limit(1_000)
    started = time.perf_counter()
    # 20,001 positions x 5,000 characters would be 100 million characters before any length check
    with pytest.raises(
        TextTooLong,
        match=r"^RegexReplace: the result would be 5,000 characters or more, .*"
        r"max_text_chars = 1,000",
    ):
        RegexReplace().execute("x" * 20_000, "", "y" * 5_000)
    assert time.perf_counter() - started < 2.0
    assert RegexReplace().execute("x" * 1_000, "x", "y") == ("y" * 1_000,)  # at the limit: fine


def test_regex_extract_all_matches_past_the_limit_is_an_error(limit):
    limit(100_000)
    with pytest.raises(TextTooLong, match="^RegexExtract: the result would be 119,999 characters"):
        RegexExtract().execute("x" * 60_000, "x", "All Matches", False, False, False, 1)


def test_string_replace_is_refused_before_it_is_built(limit):
    limit(100_000)
    with pytest.raises(TextTooLong, match=r"^StringReplace: the result would be 1,000,070,000 characters"):
        StringReplace().execute("x" * 20_000, "", "y" * 50_000)
    assert StringReplace().execute("abcabc", "b", "BB") == ("aBBcaBBc",)


def test_concatenating_a_text_with_itself_again_and_again_fails_at_the_limit(limit):
    limit(100_000)
    text = "z" * 1_000
    for _ in range(6):
        (text,) = StringConcatenate().execute(text, text, "")
    assert len(text) == 64_000
    with pytest.raises(TextTooLong, match="^StringConcatenate: the result would be 128,000 characters"):
        StringConcatenate().execute(text, text, "")


def test_case_conversion_that_lengthens_a_text_is_checked(limit):
    limit(100_000)
    with pytest.raises(TextTooLong, match="^CaseConverter: the result would be 120,000 characters"):
        CaseConverter().execute("ß" * 60_000, "UPPERCASE")


def test_the_servers_default_applies_outside_a_prompt():
    with pytest.raises(TextTooLong, match="max_text_chars = 100,000"):
        StringReplace().execute("x" * 60_000, "x", "yy")


def test_with_the_limit_off_the_worker_memory_still_bounds_a_replacement(limit, monkeypatch):
    limit(None)  # --max-text-chars 0
    assert StringReplace().execute("x" * 60_000, "x", "yy") == ("yy" * 60_000,)
    monkeypatch.setattr(regex_runner, "MEMORY_BYTES", 256 << 20)
    monkeypatch.setattr(regex_runner, "_idle", [])  # a worker started with that cap
    with pytest.raises(regex_runner.RegexStopped, match="needed more than 256 MiB of memory"):
        RegexReplace().execute("x" * 20_000, "", "y" * 50_000)  # a billion characters


def test_a_runaway_match_is_stopped_at_the_time_limit(monkeypatch):
    monkeypatch.setattr(regex_runner, "SECONDS", 0.3)
    started = time.perf_counter()
    with pytest.raises(regex_runner.RegexStopped, match="ran longer than 0.3 s and was stopped"):
        RegexExtract().execute("a" * 40 + "!", "(a+)+$", "First Match", True, False, False, 1)
    assert time.perf_counter() - started < 2.0
    assert RegexExtract().execute("a1", r"\d", "First Match", True, False, False, 1) == ("1",)  # a new worker
