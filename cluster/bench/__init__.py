"""Benchmarks of the cluster layer: dispatch decisions, the data plane, cascades."""

import socket


def free_port() -> int:
    """A loopback port no one listens on now, for a server a bench, the simulator's check or a test starts."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
