"""A plain `serve` chooses its executors, threads per executor and prompts in flight from the machine
(flags.choose_defaults), says so in one log line, and any flag given wins with the rest following from it."""

from __future__ import annotations

import logging

import pytest

from comfy_bridge.cli import build_parser
from comfy_bridge.cli import flags as cli_flags
from comfy_bridge.cli import serve as serve_cli
from comfy_bridge.cli.flags import CPU_EXECUTOR_BYTES, Defaults, Hardware, choose_defaults

GIB = 1 << 30


def test_cpu_machines_get_one_executor_of_every_core_unless_threads_are_given():
    """One executor with every core: it computes with torch's own thread count, as the in-process ModelFns do, so
    the default executor and --executors 0 give the same image. Two prompts in flight per CPU executor, so that
    their steps share forward passes (batching: --max-batch follows)."""
    two_cores = Hardware(cpus=2, gpus=0, memory_bytes=23 * GIB)
    assert choose_defaults(two_cores) == Defaults(executors=1, executor_threads=2, concurrent_prompts=2)
    assert choose_defaults(Hardware(16, 0, 256 * GIB)) == Defaults(1, 16, 2)
    assert choose_defaults(two_cores, executor_threads=1) == Defaults(2, 1, 4)
    # memory bounds the executors (each holds its own weights); the cores go to the ones there are
    assert choose_defaults(Hardware(16, 0, 2 * CPU_EXECUTOR_BYTES + GIB), executor_threads=2) == Defaults(2, 2, 4)
    assert choose_defaults(Hardware(4, 0, GIB), executor_threads=1) == Defaults(1, 1, 2)
    assert choose_defaults(Hardware(1, 0, 64 * GIB)) == Defaults(1, 1, 2)


def test_gpu_machines_get_one_executor_per_gpu_with_the_cores_shared():
    assert choose_defaults(Hardware(cpus=16, gpus=4, memory_bytes=64 * GIB)) == Defaults(4, 4, 4)
    assert choose_defaults(Hardware(cpus=2, gpus=4, memory_bytes=64 * GIB)) == Defaults(4, 1, 4)


@pytest.mark.parametrize("n", [1, 2, 3, 8])
def test_executors_alone_shares_the_cores_and_keeps_every_executor_busy(n):
    """`--executors N` alone: the cores divided among the N (never N x all cores, never one thread where
    more cores are free) and N prompts in flight, so none idles while prompts wait (issue 41: `--executors 2`
    alone ran one prompt at a time, 1.58x ComfyUI's makespan)."""
    chosen = choose_defaults(Hardware(8, 0, 64 * GIB), executors=n)
    assert chosen.executors == n
    assert chosen.executor_threads == max(1, 8 // n)
    assert chosen.concurrent_prompts >= n


def test_flags_given_win_and_the_rest_follows():
    machine = Hardware(8, 0, 64 * GIB)
    assert choose_defaults(machine, executor_threads=4) == Defaults(2, 4, 4)
    assert choose_defaults(machine, concurrent_prompts=1) == Defaults(1, 8, 1)
    assert choose_defaults(machine, executors=2, executor_threads=2, concurrent_prompts=5) == Defaults(2, 2, 5)
    # in-process ModelFns: one prompt at a time unless asked
    assert choose_defaults(machine, executors=0).concurrent_prompts == 1


def _apply(argv: list[str], monkeypatch, hardware: Hardware):
    monkeypatch.setattr(cli_flags, "find_hardware", lambda gpus=0: hardware)
    args = build_parser().parse_args(["serve", *argv])
    serve_cli.apply_machine_defaults(args)
    return args


def test_serve_fills_in_what_no_flag_set_and_logs_it_in_one_line(monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger="comfy_cluster")
    args = _apply([], monkeypatch, Hardware(2, 0, 23 * GIB))
    assert (args.executors, args.executor_threads, args.concurrent_prompts) == (1, 2, 2)
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("machine:")]
    assert "2 CPU cores" in line and "1 executor(s) x 2 thread(s), 2 prompt(s) at once" in line
    assert "chosen from the machine" in line
    caplog.clear()
    args = _apply(["--executors", "2"], monkeypatch, Hardware(8, 0, 64 * GIB))
    assert (args.executors, args.executor_threads, args.concurrent_prompts) == (2, 4, 4)
    assert "set by --executors" in caplog.records[-1].getMessage()
    # in-process: torch's own threads unless --executor-threads is given
    args = _apply(["--executors", "0"], monkeypatch, Hardware(8, 0, 64 * GIB))
    assert (args.executors, args.executor_threads, args.concurrent_prompts) == (0, 0, 1)


def test_ray_keeps_its_per_node_defaults(monkeypatch):
    args = _apply(["--ray"], monkeypatch, Hardware(2, 0, 23 * GIB))
    assert args.executors is None and args.concurrent_prompts == 1


def test_this_machine_is_found():
    found = cli_flags.find_hardware()
    assert found.cpus >= 1 and found.gpus == 0 and found.memory_bytes > GIB
