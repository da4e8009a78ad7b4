"""Which device each local executor of `serve` runs on, from ComfyUI's flags and the GPUs there are."""

from __future__ import annotations

import pytest

from comfy_bridge.cli import build_parser
from comfy_bridge.cli.flags import executor_devices


def devices(argv: list[str], gpus: int) -> list[str]:
    return executor_devices(build_parser().parse_args(["serve", *argv]), cuda_devices=gpus)


def test_one_cpu_executor_by_default_even_beside_gpus():
    assert devices([], gpus=4) == ["cpu"]
    assert devices(["--executors", "2"], gpus=4) == ["cpu", "cpu"]


def test_gpu_executors_one_per_gpu_or_in_turn():
    assert devices(["--executor-device", "cuda"], gpus=4) == ["cuda:0", "cuda:1", "cuda:2", "cuda:3"]
    assert devices(["--executor-device", "cuda", "--executors", "3"], gpus=2) == ["cuda:0", "cuda:1", "cuda:0"]
    assert devices(["--executor-device", "auto"], gpus=2) == ["cuda:0", "cuda:1"]
    assert devices(["--executor-device", "auto"], gpus=0) == ["cpu"]
    with pytest.raises(ValueError, match="no CUDA device"):
        devices(["--executor-device", "cuda"], gpus=0)


def test_cpu_flag_and_cuda_device_flag():
    assert devices(["--executor-device", "cuda", "--cpu"], gpus=2) == ["cpu"]
    assert devices(["--executor-device", "cuda", "--cuda-device", "1"], gpus=2) == ["cuda:1"]
    assert devices(["--executor-device", "cuda", "--cuda-device", "1", "--executors", "2"], gpus=2) == [
        "cuda:1",
        "cuda:1",
    ]
    with pytest.raises(ValueError, match="--cuda-device 5"):
        devices(["--executor-device", "cuda", "--cuda-device", "5"], gpus=2)


def test_zero_executors_runs_model_fns_in_the_server_process():
    assert devices(["--executors", "0", "--executor-device", "cuda"], gpus=2) == []
