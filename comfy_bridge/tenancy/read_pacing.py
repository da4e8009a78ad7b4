"""`ReadPacer`: each caller's reads of a polled route (GET /queue, GET /history) are answered at most
once every READ_INTERVAL_S; a faster read waits for its turn, it is never refused (ComfyUI's clients do
not expect a 429 there).

Built once per change, an answer still has to be sent, and a client polling in a tight loop asks for
it hundreds of times a second: for a long queue that is megabytes each time, written by the event loop,
whose thread shares the GIL and the CPUs with the one that runs the prompts. The web UI reads both
routes once per status message, so a pace of ten a second per caller and route delays it by at most
a tenth of a second and a tight loop by as much as it needs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable

READ_INTERVAL_S = 0.1
PACED_ROUTES = frozenset({"/queue", "/history"})  # also under /api
MAX_KEYS = 10_000  # callers x routes remembered before the idle ones are forgotten


def paced_route(method: str, path: str) -> str | None:
    """The route a request reads, when it is one that is paced (`/api/queue` is `/queue`)."""
    route = path[len("/api") :] if path.startswith("/api/") else path
    return route if method == "GET" and route in PACED_ROUTES else None


class ReadPacer:
    def __init__(self, interval_s: float = READ_INTERVAL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval_s = interval_s
        self._clock = clock
        self._next: dict[Hashable, float] = {}  # key -> when its next read may be answered

    def delay(self, key: Hashable) -> float:
        """Seconds the read of `key` (a caller and a route) waits: reads of one key are answered
        interval_s apart, in the order they came."""
        now = self._clock()
        turn = max(now, self._next.get(key, now))
        self._next[key] = turn + self.interval_s
        if len(self._next) > MAX_KEYS:
            self._next = {k: t for k, t in self._next.items() if t > now}
        return turn - now
