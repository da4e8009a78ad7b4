"""Benchmarks behind `comfy-cluster bench NAME`: ratios against a baseline run in the same process."""

from cluster.bench import free_port

__all__ = ["free_port"]
