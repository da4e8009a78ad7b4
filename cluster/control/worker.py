"""How the head's work gets done: one lock guards all of the head's state, and whichever thread holds it
does the work. A caller's `submit` schedules and sends the dispatch from its own thread, so a call does
not wait for another thread to wake up; the head thread handles what arrives from executors and the
periodic checks, and sleeps on the socket's signalling file descriptor (or only its tick, while event
loops read the socket: cluster.control.results.LoopReaders) until the next deadline (`wait_s`)."""

from __future__ import annotations

import collections
import logging
import socket
import threading
from collections.abc import Callable

import zmq

log = logging.getLogger("cluster.head")


class HeadWorker:
    """`step()` does one round of the head's work (receive, check, dispatch) and says whether the socket
    has more to read; `on_error(e)` fails what is in flight after a bug (it must never hang);
    `wait_s()` is how long the head thread may sleep; `reading()` whether event loops read the socket
    now; `on_exit()` runs on the head thread, under the lock, once the head stopped."""

    def __init__(
        self,
        step: Callable[[], bool],
        on_error: Callable[[Exception], None],
        wait_s: Callable[[], float],
        reading: Callable[[], bool],
        on_exit: Callable[[], None],
    ) -> None:
        self.step, self.on_error, self.wait_s, self.reading, self.on_exit = step, on_error, wait_s, reading, on_exit
        self.lock = threading.Lock()
        self.running = False
        self._holder: int | None = None  # thread ident holding the lock for head work
        self._calls: collections.deque[Callable[[], None]] = collections.deque()  # deferred, see `call`
        self._wake_r, self._wake_w = socket.socketpair()  # wakes the head thread
        self.thread: threading.Thread | None = None
        self._fd = -1

    def start(self, fd: int) -> None:
        """Start the head thread, watching the socket's file descriptor `fd`."""
        self._fd = fd
        self.running = True
        self.thread = threading.Thread(target=self._loop, name="cluster-head", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        with self.lock:
            self.running = False
        self.wake()
        if self.thread is not None:
            self.thread.join(timeout=5)

    def wake(self) -> None:
        self._wake_w.send(b"x")

    def wake_from_elsewhere(self) -> None:
        """Work with a deadline was set from another thread than the head thread: wake it, so that its
        sleep (`wait_s`, computed before) ends by then."""
        if self.thread is not None and threading.get_ident() != self.thread.ident:
            self.wake()

    def call(self, fn: Callable[[], None]) -> None:
        """Run `fn` on the head's state now, in this thread, then do the work it set in motion
        (dispatches, and messages that arrived meanwhile). From inside head work in this thread (a
        future's callback that submits again) it is deferred until that work is done, and before
        the head starts or after it stops it waits for the head thread (which fails it at the end)."""
        me = threading.get_ident()
        if self._holder == me:
            self._calls.append(fn)
            return
        with self.lock:
            if not self.running:
                self._calls.append(fn)
                return
            self._holder = me
            try:
                fn()
                self._pump()
            finally:
                self._holder = None

    def _drain(self) -> None:
        while self._calls:
            self._calls.popleft()()

    def _pump(self) -> None:
        """Deferred calls, received messages, checks and dispatches until nothing is pending; the
        socket's events are read last, so its file descriptor signals whatever arrives next."""
        try:
            while True:
                self._drain()
                more = self.step()
                if not self._calls and not more:
                    return
        except Exception as e:  # a bug must fail the requests in flight, never hang them
            log.exception("cluster head loop error")
            self.on_error(e)

    def _loop(self) -> None:
        poller = zmq.Poller()
        poller.register(self._wake_r, zmq.POLLIN)
        watching = False
        me = threading.get_ident()
        while self.running:
            # While an event loop reads the socket, this thread leaves it to that loop and only wakes
            # for its tick: two threads woken by every reply slowed each other on a small host. The
            # last reader to stop wakes this thread to watch the socket again.
            if watching != (not self.reading()):
                watching = not watching
                if watching:
                    poller.register(self._fd, zmq.POLLIN)
                else:
                    poller.unregister(self._fd)
            events = dict(poller.poll(self.wait_s() * 1000))
            if self._wake_r.fileno() in events:
                self._wake_r.recv(65536)
            with self.lock:
                if not self.running:
                    break
                self._holder = me
                try:
                    self._pump()
                finally:
                    self._holder = None
        with self.lock:
            self._holder = me
            self._drain()
            self.on_exit()
            self._holder = None
