"""Benchmarks behind `comfy-cluster bench NAME`: ratios against a baseline run in the same process."""

import socket


def free_port() -> int:
    """A loopback port no one listens on now, for a server a bench starts."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
