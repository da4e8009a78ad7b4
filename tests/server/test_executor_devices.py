"""Which device each local executor of `serve` runs on, from ComfyUI's flags and the GPUs there are."""
from __future__ import annotations

import pytest

from comfy_bridge.args import executor_devices
from comfy_bridge.cli import build_parser


def devices(argv: list[str], gpus: int) -> list[str]:
    return executor_devices(build_parser().parse_args(["serve", *argv]), cuda_devices=gpus)


def test_one_executor_per_gpu_by_default_and_one_cpu_executor_without_cuda():
    assert devices([], gpus=4) == ["cuda:0", "cuda:1", "cuda:2", "cuda:3"]
    assert devices([], gpus=0) == ["cpu"]


def test_more_executors_than_gpus_take_the_gpus_in_turn():
    assert devices(["--executors", "3"], gpus=2) == ["cuda:0", "cuda:1", "cuda:0"]
    assert devices(["--executors", "2"], gpus=0) == ["cpu", "cpu"]


def test_cpu_flag_and_cuda_device_flag():
    assert devices(["--cpu"], gpus=2) == ["cpu"]
    assert devices(["--cuda-device", "1"], gpus=2) == ["cuda:1"]
    assert devices(["--cuda-device", "1", "--executors", "2"], gpus=2) == ["cuda:1", "cuda:1"]
    with pytest.raises(ValueError, match="--cuda-device 5"):
        devices(["--cuda-device", "5"], gpus=2)


def test_zero_executors_runs_model_fns_in_the_server_process():
    assert devices(["--executors", "0"], gpus=2) == []
