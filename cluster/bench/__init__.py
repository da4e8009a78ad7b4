"""Benchmarks of the cluster layer: dispatch decisions, the data plane, cascades."""
