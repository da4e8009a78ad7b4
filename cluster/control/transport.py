"""The head's transport: one ZeroMQ ROUTER socket that executors connect to. It sends one message to one
executor, and receives and decodes what executors send: the head decodes only the typed messages of
cluster.messages, so a garbage or truncated frame is dropped and counted (`bad_messages`), never raised.

The socket is used from several threads, always under the head's lock (cluster.control.worker); the
head thread waits on its signalling file descriptor (`fd`, edge-triggered), never on the socket itself,
and reads its events again after every use (`has_input`)."""

from __future__ import annotations

import collections
import logging
import os
from collections.abc import Callable

import msgspec
import zmq

from cluster import messages as m
from cluster.dataplane import remote

log = logging.getLogger("cluster.head")

WILDCARDS = ("0.0.0.0", "*", "::")


class Transport:
    def __init__(self, requested_address: str, counters: collections.Counter) -> None:
        self.requested_address = requested_address
        self.address = requested_address  # the bound one once `bind` ran (a tcp://...:0 gets its port)
        self.counters = counters
        self.fd = -1

    def bind(self) -> None:
        ctx = zmq.Context.instance()
        self._sock = ctx.socket(zmq.ROUTER)
        self._sock.setsockopt(zmq.ROUTER_MANDATORY, 1)  # sending to a vanished executor raises
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.bind(self.requested_address)
        self.address = self._sock.getsockopt_string(zmq.LAST_ENDPOINT)
        self.fd = self._sock.getsockopt(zmq.FD)

    def send(self, identity: bytes, msg: msgspec.Struct) -> None:
        """Send without waiting; zmq.ZMQError when the executor is gone (its loss is the caller's call)."""
        self._sock.send_multipart([identity, m.encode(msg)], zmq.NOBLOCK)

    def reply(self, identity: bytes, msg: msgspec.Struct) -> None:
        """Answer whoever sent a message, registered or not; one that is gone needs no answer."""
        try:
            self.send(identity, msg)
        except zmq.ZMQError:
            pass

    def has_input(self) -> bool:
        return bool(self._sock.getsockopt(zmq.EVENTS) & zmq.POLLIN)

    def receive(self, handle: Callable[[bytes, m.ToHead], None]) -> None:
        """Hand what has arrived to `handle(identity, message)`; a message it cannot handle is dropped."""
        for _ in range(10_000):  # bounded, so submissions and checks are not starved
            # Events first: reading them keeps the interpreter lock, while an empty recv would let
            # the head thread (woken by the same signal) take it in the middle of a caller's pump.
            if not self.has_input():
                return
            try:
                frames = self._sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            if len(frames) != 2:
                log.warning("dropped a message with %d frames", len(frames))
                self.counters["bad_messages"] += 1
                continue
            identity, raw = frames
            try:
                msg = m.head_decoder.decode(raw)
            except (msgspec.DecodeError, msgspec.ValidationError) as e:
                log.warning("dropped a bad message from %r: %s", identity[:64], e)
                self.counters["bad_messages"] += 1
                continue
            try:
                handle(identity, msg)
            except Exception:  # a well-formed but nonsensical message must not stop the head
                log.exception("dropped a message from %r that could not be handled", identity[:64])
                self.counters["bad_messages"] += 1

    def close(self) -> None:
        self._sock.close()

    def unlink(self) -> None:
        """Remove an ipc:// socket's file (after `close`)."""
        if self.address.startswith("ipc://"):
            try:
                os.unlink(self.address[len("ipc://") :])
            except OSError:
                pass

    @property
    def reachable_address(self) -> str:
        """The address executors on other machines connect to: `address` with a wildcard host (tcp://0.0.0.0)
        replaced by this machine's IP on its default route."""
        if self.address.startswith("tcp://"):
            host, port = self.address[len("tcp://") :].rsplit(":", 1)
            if host.strip("[]") in WILDCARDS:
                return f"tcp://{remote.local_ip('')}:{port}"
        return self.address

    @property
    def data_ip(self) -> str | None:
        """Where this process serves its own tensors to executors on other hosts (the head's IP), or
        None when none can be elsewhere (an ipc:// head, shared memory allowed)."""
        if self.address.startswith("tcp://"):
            host = self.address[len("tcp://") :].rsplit(":", 1)[0].strip("[]")
            return remote.local_ip("") if host in WILDCARDS else host
        return "127.0.0.1" if remote.mode() == "tcp" else None
