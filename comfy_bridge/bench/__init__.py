"""Benchmarks behind `comfy-cluster bench NAME`: ratios against a baseline run in the same process."""
