"""/system_stats never creates a CUDA context in the server process: GPUs come from what the executors
report, or from a context the process already has."""

from __future__ import annotations

import pytest
import torch

from comfy_bridge.server.system import system_stats


@pytest.fixture
def a_gpu_without_a_context(monkeypatch):
    """A machine with a GPU that this process has not touched: measuring it would create the context."""

    def context(*_a, **_k):
        raise AssertionError("the server process created a CUDA context")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    for name in ("mem_get_info", "memory_reserved", "memory_allocated", "get_device_name"):
        monkeypatch.setattr(torch.cuda, name, context)


def test_gpus_are_the_executors_reports_summed_per_device(a_gpu_without_a_context):
    GiB = 1 << 30
    reports = [
        {"device": "cuda:0", "memory_budget": 60 * GiB, "memory_used": 10 * GiB},
        {"device": "cuda:0", "memory_budget": 60 * GiB, "memory_used": 20 * GiB},
        {"device": "cuda:1", "memory_budget": 100 * GiB, "memory_used": 0},
        {"device": "cpu", "memory_budget": 8 * GiB, "memory_used": 0},
    ]
    devices = system_stats(reports)["devices"]
    assert [(d["name"], d["type"], d["index"]) for d in devices] == [("cuda:0", "cuda", 0), ("cuda:1", "cuda", 1)]
    assert devices[0]["vram_total"] == 120 * GiB and devices[0]["vram_free"] == 90 * GiB
    assert devices[1]["torch_vram_free"] == 100 * GiB


def test_without_gpu_executors_or_a_context_the_host_is_reported(a_gpu_without_a_context):
    (device,) = system_stats(None)["devices"]
    assert device["type"] == "cpu" and device["vram_total"] > 0
