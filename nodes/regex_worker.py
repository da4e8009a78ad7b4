"""The process that runs the regular-expression nodes' matching (started by nodes.regex_runner).

Python's `re` holds the GIL for a whole match, and a pattern such as `(a+)+$` backtracks for minutes:
in the server's process that would freeze every tenant's requests and no interrupt could reach it.
Here it freezes only this process, which the server kills on an interrupt or past the time limit.
Standard library only, run as a script (`python -I -S regex_worker.py MEMORY_BYTES`): it starts in
milliseconds and never imports torch. Frames on stdin/stdout: 4 bytes of length, then JSON.
"""

from __future__ import annotations

import json
import math
import os
import re
import resource
import signal
import sys
from collections.abc import Callable
from typing import Any

JOIN = "\n"  # ComfyUI joins the results of the modes that collect several matches with this


class _TooLong(Exception):
    """The result passes the text limit (args[0]: its length so far)."""


def _check(length: int, limit: int | None) -> None:
    if limit is not None and length > limit:
        raise _TooLong(length)


def _search(req: dict) -> bool:
    return re.search(req["pattern"], req["string"], req["flags"]) is not None


def _extract(req: dict) -> str:
    pattern, string, flags, mode, group = req["pattern"], req["string"], req["flags"], req["mode"], req["group"]
    if mode == "First Match":
        match = re.search(pattern, string, flags)
        result = match.group(0) if match else ""
    elif mode == "All Matches":
        # findall gives tuples for patterns with several groups: their first group stands for the match
        found = re.findall(pattern, string, flags)
        result = JOIN.join(m[0] if isinstance(m, tuple) else m for m in found)
    elif mode == "First Group":
        match = re.search(pattern, string, flags)
        result = match.group(group) if match and len(match.groups()) >= group else ""
    elif mode == "All Groups":
        result = JOIN.join(
            m.group(group) for m in re.finditer(pattern, string, flags) if m.groups() and len(m.groups()) >= group
        )
    else:
        result = ""
    _check(len(result), req["max_chars"])
    return result


def _sub(req: dict) -> str:
    """re.sub, stopped as soon as the text built so far passes the limit (a 20 KB text can otherwise
    become hundreds of megabytes before its length could be checked)."""
    compiled = re.compile(req["pattern"], req["flags"])
    repl, string, limit = req["repl"], req["string"], req["max_chars"]
    # re.sub checks the replacement template before it searches (a bad group reference fails even
    # without a match): substituting in "" does the same check at no cost.
    compiled.sub(repl, "", count=1)
    literal = "\\" not in repl  # re.sub's own rule: a template without a backslash is used as it is
    done = {"end": 0, "length": 0}

    def replace(match: re.Match) -> str:
        text = repl if literal else match.expand(repl)
        done["length"] += match.start() - done["end"] + len(text)
        done["end"] = match.end()
        _check(done["length"], limit)
        return text

    result = compiled.sub(replace, string, count=req["count"])
    _check(len(result), limit)
    return result


OPS: dict[str, Callable[[dict], Any]] = {"search": _search, "extract": _extract, "sub": _sub}


def _answer(req: dict) -> dict:
    # A kernel timer as the last resort: SIGALRM's default action ends this process even while `re`
    # holds the interpreter, should the server that watches the clock be gone.
    signal.alarm(math.ceil(req["seconds"]) + 2)
    try:
        return {"value": OPS[req["op"]](req)}
    except re.error as exc:
        return {"re_error": [exc.msg, exc.pattern, exc.pos]}
    except _TooLong as exc:
        return {"too_long": exc.args[0]}
    except MemoryError:
        return {"failed": ["MemoryError", ""]}
    except Exception as exc:  # reported to the node as the same kind of error (TypeError, ...)
        return {"failed": [type(exc).__name__, str(exc)]}
    finally:
        signal.alarm(0)


def _read_exact(stream: Any, size: int) -> bytes:
    data = stream.read(size)
    if len(data) < size:
        raise EOFError
    return data


def main() -> None:
    memory = int(sys.argv[1])
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the server's to handle; stdin's end stops us
    os.nice(10)  # a runaway pattern yields the CPU to the server's own threads
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        try:
            req = json.loads(_read_exact(stdin, int.from_bytes(_read_exact(stdin, 4), "big")))
        except EOFError:
            return  # the server closed the pipe (or exited)
        reply = json.dumps(_answer(req)).encode("ascii")
        stdout.write(len(reply).to_bytes(4, "big") + reply)
        stdout.flush()


if __name__ == "__main__":
    main()
