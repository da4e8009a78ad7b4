"""ComfyUI's command-line flags, so `python main.py --listen` keeps working.

Flags that change what the server does are honoured; model-runtime flags that only matter to
ComfyUI's own memory manager (precision, attention, VRAM modes) are accepted and ignored; any
other unknown flag is accepted with a warning instead of argparse's exit(2).
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cluster.scheduling.policies import POLICIES

log = logging.getLogger("comfy_cluster")

# Accepted for compatibility; our executors manage memory and precision themselves.
ACCEPTED_RUNTIME_FLAGS = (
    "--gpu-only",
    "--highvram",
    "--normalvram",
    "--lowvram",
    "--novram",
    "--disable-smart-memory",
    "--force-fp16",
    "--force-fp32",
    "--fp32-unet",
    "--fp16-unet",
    "--bf16-unet",
    "--fp8_e4m3fn-unet",
    "--fp16-vae",
    "--fp32-vae",
    "--bf16-vae",
    "--cpu-vae",
    "--fp8_e4m3fn-text-enc",
    "--fp16-text-enc",
    "--fp32-text-enc",
    "--use-split-cross-attention",
    "--use-quad-cross-attention",
    "--use-pytorch-cross-attention",
    "--use-sage-attention",
    "--use-flash-attention",
    "--disable-xformers",
    "--force-upcast-attention",
    "--dont-upcast-attention",
    "--deterministic",
    "--auto-launch",
    "--disable-auto-launch",
    "--windows-standalone-build",
    "--disable-api-nodes",
    "--log-stdout",
    "--enable-compress-response-body",
    "--disable-ipex-optimize",
    "--force-channels-last",
    "--disable-mmap",
    "--mmap-torch-files",
)


def add_comfyui_flags(p: argparse.ArgumentParser) -> None:
    """The flags of ComfyUI's main.py that Comfy Cluster honours."""
    p.add_argument(
        "--listen",
        nargs="?",
        const="0.0.0.0,::",
        default="127.0.0.1",
        metavar="IP",
        help="address(es) to listen on, comma separated; bare --listen means all interfaces",
    )
    p.add_argument("--port", type=int, default=8188)
    p.add_argument("--tls-keyfile")
    p.add_argument("--tls-certfile")
    p.add_argument("--enable-cors-header", nargs="?", const="*", default=None, metavar="ORIGIN")
    p.add_argument("--max-upload-size", type=float, default=100, help="upload limit in MB")
    p.add_argument("--base-directory", help="ComfyUI's name for the workspace root")
    p.add_argument("--output-directory")
    p.add_argument("--input-directory")
    p.add_argument("--temp-directory")
    p.add_argument("--user-directory")
    p.add_argument("--extra-model-paths-config", action="append", nargs="+", default=[], metavar="PATH")
    p.add_argument("--front-end-version", default=None)
    p.add_argument("--front-end-root", default=None)
    p.add_argument("--multi-user", action="store_true")
    p.add_argument("--cpu", action="store_true", help="run executors on the CPU")
    p.add_argument("--preview-method", default="none", choices=["none", "auto", "latent2rgb", "taesd"])
    p.add_argument("--preview-size", type=int, default=512)
    cache = p.add_mutually_exclusive_group()
    cache.add_argument("--cache-classic", action="store_true")
    cache.add_argument("--cache-lru", type=int, default=0, metavar="N")
    cache.add_argument("--cache-none", action="store_true")
    p.add_argument("--disable-all-custom-nodes", action="store_true")
    p.add_argument("--whitelist-custom-nodes", nargs="*", default=[])
    p.add_argument("--disable-metadata", action="store_true")
    p.add_argument("--disable-assets", action="store_true", help="turn off the local assets API (/api/assets)")
    p.add_argument("--default-hashing-function", default="sha256", choices=["md5", "sha1", "sha256", "sha512"])
    p.add_argument("--quick-test-for-ci", action="store_true", help="exit after start-up")
    p.add_argument("--dont-print-server", action="store_true")
    p.add_argument("--verbose", nargs="?", const="DEBUG", default="INFO")
    p.add_argument("--reserve-vram", type=float, default=None)
    p.add_argument("--cuda-device", type=int, default=None)
    p.add_argument("--default-device", type=int, default=None)
    p.add_argument("--database-url", default=None)
    p.add_argument("--comfy-api-base", default=None)
    p.add_argument("--fast", nargs="*", default=None)
    for flag in ACCEPTED_RUNTIME_FLAGS:
        p.add_argument(flag, action="store_true", help=argparse.SUPPRESS)


def add_cluster_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workspace", default=None, help="workspace folder (default: platform data dir)")
    p.add_argument(
        "--executors",
        type=int,
        default=None,
        help="local executor processes to start (default: chosen from the machine, see choose_defaults: one "
        "per GPU with --executor-device cuda, else one with every core (cores / --executor-threads as memory "
        "allows when that is given); 0: run ModelFns inside the "
        "server process, on the CPU, or with --head-address: only on executors that join)",
    )
    p.add_argument(
        "--executor-device",
        choices=("cpu", "cuda", "auto"),
        default="cpu",
        help="where executors run ModelFns: the CPU (default: GPU executors have not run on a GPU "
        "yet, see the README), the GPUs (in turn; --cuda-device N: only GPU N), or auto "
        "(the GPUs when CUDA has any)",
    )
    p.add_argument(
        "--head-address",
        default=None,
        metavar="tcp://IP:PORT",
        help="where the head listens for executors on other machines (`comfy-cluster executor --head "
        "tcp://IP:PORT`); they must know the cluster secret ($COMFY_CLUSTER_SECRET, else "
        "cluster.secret in the workspace, created now if absent). A non-loopback IP needs a tenant "
        "or --insecure-open. With it, --executors 0 starts no local executor and waits for "
        "executors to join (default: a local socket only this machine's executors reach)",
    )
    p.add_argument(
        "--ray",
        nargs="?",
        const="local",
        default=None,
        metavar="ADDRESS",
        help="place executors on a Ray cluster as Ray actors: `auto` (the cluster this machine is part "
        "of), a Ray address (HOST:PORT or ray://HOST:PORT), or none: a local Ray started here. One "
        "executor per GPU on every node with --executor-device cuda (auto: on nodes with GPUs), "
        "else --executors N CPU executors per node (default 1); nodes that join get theirs. The "
        "head listens on --head-address (default: this machine's address toward the Ray cluster, "
        "which needs a tenant or --insecure-open; loopback for a local Ray)",
    )
    p.add_argument(
        "--ray-autoscale",
        default=None,
        metavar="LOW:HIGH",
        help="with --ray: executors follow demand between LOW and HIGH instead of one per GPU on every "
        "node: one more while prompts queue and all are busy (Ray places it where there is room, or "
        "its autoscaler, KubeRay's, adds a node for it), an idle one retired after --ray-keepalive "
        "(its node then goes idle and the autoscaler removes it)",
    )
    p.add_argument(
        "--ray-keepalive",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="with --ray-autoscale: how long an executor stays idle before it is retired (default 300)",
    )
    p.add_argument(
        "--ray-nodes-as-hosts",
        action="store_true",
        help="with --ray: treat every Ray node as a host of its own, moving tensors between nodes over "
        "TCP even where they share a machine (Ray nodes started on one machine, as tests do)",
    )
    p.add_argument(
        "--data-plane",
        choices=("auto", "shm", "tcp"),
        default=None,
        help="how tensors move between processes: auto (shared memory on one host, TCP across hosts), "
        "shm, or tcp (TCP between every two processes, the cross-host path on one host); "
        "default: $COMFY_CLUSTER_DATA_PLANE or auto",
    )
    p.add_argument(
        "--executor-threads",
        type=int,
        default=0,
        help="torch threads per executor, and for the in-process ModelFns of --executors 0 (0: the machine's cores "
        "divided among the executors, --executors N or chosen; in-process, torch's default)",
    )
    p.add_argument(
        "--concurrent-prompts",
        type=int,
        default=None,
        metavar="N",
        help="prompts orchestrated at once, each with its own engine and output cache (1: ComfyUI's one at a "
        "time, one shared cache; default: two per CPU executor, whose steps then share forward passes, one per "
        "GPU executor, so none idles while prompts wait)",
    )
    p.add_argument(
        "--scheduler",
        default="vtime",
        choices=POLICIES,
        help="scheduling policy between tenants",
    )
    p.add_argument(
        "--fairness-slack",
        type=float,
        default=None,
        metavar="SECONDS",
        help="vTime slack: tenants within this much service of the least-served compete (default: the scheduler's)",
    )
    p.add_argument(
        "--max-batch",
        type=int,
        default=None,
        metavar="N",
        help="samples of denoising steps from different prompts (any sampler, seed or CFG on the same model) "
        "whose model evaluations run as one batch on an executor (or in-process with --executors 0), per "
        "model (1: no batching; a cascade's controller overrides it for its models). Default: the prompts in "
        "flight per executor, --concurrent-prompts / executors rounded up: batching pays only where prompts "
        "outnumber executors (docs/scheduler.md#batching)",
    )
    p.add_argument(
        "--batch-window-ms",
        type=float,
        default=20.0,
        metavar="MS",
        help="with --max-batch above 1: how long a batch that is not full waits for more steps",
    )


def executor_devices(args: argparse.Namespace, cuda_devices: int | None = None) -> list[str]:
    """The device of each local executor. With --executor-device cuda (or auto on a CUDA machine): one
    executor per GPU unless --executors says otherwise, spread over the GPUs in turn, or only the GPU
    --cuda-device names; else the CPU (--cpu always means the CPU). `cuda_devices`: how many CUDA
    devices there are (default: ask torch)."""
    cpu = ["cpu"] * (1 if args.executors is None else args.executors)
    if args.cpu or args.executor_device == "cpu":
        return cpu  # without asking torch: serve starts its executors before importing it (seconds)
    if cuda_devices is None:
        import torch

        cuda_devices = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if args.executor_device == "cuda" and cuda_devices == 0:
        raise ValueError("--executor-device cuda: torch sees no CUDA device on this machine")
    if cuda_devices == 0:
        return cpu
    if args.cuda_device is not None:
        if not 0 <= args.cuda_device < cuda_devices:
            raise ValueError(f"--cuda-device {args.cuda_device}: this machine has CUDA devices 0 to {cuda_devices - 1}")
        gpus = [f"cuda:{args.cuda_device}"]
    else:
        gpus = [f"cuda:{i}" for i in range(cuda_devices)]
    n = len(gpus) if args.executors is None else args.executors
    return [gpus[i % len(gpus)] for i in range(n)]


def shared_options(
    command: argparse.ArgumentParser, add: Callable[[argparse.ArgumentParser], object]
) -> argparse.ArgumentParser:
    """Options that every verb of `command` takes, accepted before the verb (`tenants --workspace W add X`)
    and after it (`tenants add X --workspace W`, as users type them). `add` adds them to a parser without
    defaults; they go on `command` itself and on the returned parser, to pass as `parents=[...]` to each
    verb. The verbs' copies default to SUPPRESS because argparse copies a verb's defaults over the
    namespace, which would reset a value given before the verb."""
    add(command)
    verb_options = argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS)
    add(verb_options)
    return verb_options


def parse_known(p: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse, warning about (not failing on) flags we do not know."""
    args, unknown = p.parse_known_args(argv)
    if unknown:
        log.warning("ignoring unknown ComfyUI flags: %s", " ".join(unknown))
    return args


def cache_mode(args: argparse.Namespace) -> tuple[str, int]:
    if args.cache_none:
        return "none", 0
    if args.cache_lru:
        return "lru", args.cache_lru
    return "classic", 0


@dataclass(frozen=True)
class Hardware:
    """What `serve` finds on its machine: CPU cores it may use, GPUs its executors would run on (0 when
    they run on the CPU) and memory in bytes."""

    cpus: int
    gpus: int
    memory_bytes: int


@dataclass(frozen=True)
class Defaults:
    """Local executors, torch threads per executor and prompts orchestrated at once."""

    executors: int
    executor_threads: int
    concurrent_prompts: int


# On the CPU `serve` starts one executor with every core unless threads per executor are given. That executor then
# computes with the in-process ModelFns' thread count (torch's own), so a workflow gives the same image with the
# default executor and with --executors 0 (float kernels round by thread count). Issue 41 saw two executors of one
# thread with two prompts in flight at 0.98x real ComfyUI's makespan against 1.05x for this default on 2 cores;
# that is not yet a recorded result (`bench throughput --serve-flags ...`, docs/benchmarks.md, Throughput), so
# two executors of one thread stay a choice (`--executor-threads 1`).
# Each CPU executor keeps two prompts in flight, so that their denoising steps share its forward passes
# (--max-batch follows: prompts per executor): on a CPU a step of a small image is bound by reading the
# weights, which one pass of two prompts reads once. The network is batch-invariant, so each image is the one
# the prompt gives alone. A GPU executor keeps one until a recorded result says otherwise.
CPU_PROMPTS_PER_EXECUTOR = 2
# Memory one CPU executor may need for an SD1.5-sized model in float32 with its activations: more executors
# than memory / this would swap.
CPU_EXECUTOR_BYTES = 6 << 30


def choose_defaults(
    hardware: Hardware,
    executors: int | None = None,
    executor_threads: int | None = None,
    concurrent_prompts: int | None = None,
) -> Defaults:
    """The local executors, threads and prompts in flight for `hardware`; any value given wins and the
    others follow from it (`--executors N` alone divides the cores among N and keeps at least N prompts in
    flight, so that no executor idles while prompts wait; two per CPU executor, CPU_PROMPTS_PER_EXECUTOR)."""
    cpus = max(1, hardware.cpus)
    if executors is None:
        if hardware.gpus:
            executors = hardware.gpus
        else:
            by_cores = cpus // executor_threads if executor_threads else 1
            executors = max(1, min(by_cores, hardware.memory_bytes // CPU_EXECUTOR_BYTES))
    if not executor_threads:
        executor_threads = max(1, cpus // max(1, executors))
    if concurrent_prompts is None:
        per_executor = 1 if hardware.gpus else CPU_PROMPTS_PER_EXECUTOR
        concurrent_prompts = executors * per_executor if executors else 1
    return Defaults(executors, executor_threads, concurrent_prompts)


def find_hardware(gpus: int = 0) -> Hardware:
    """This machine: the cores this process may run on, physical memory; `gpus` as the caller counted them."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return Hardware(cpus, gpus, os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
