"""`comfy-cluster serve` (and `python main.py`): the ComfyUI-compatible server, its local executors and
the hooks that join the layers (the engine's runtime, the cascade controller's model keys)."""

from __future__ import annotations

import argparse
import gc
import importlib.util
import logging
import os
import re
import signal
import threading
import time
from concurrent.futures import Future
from typing import TYPE_CHECKING

from comfy_bridge.cli import flags as cli_args
from comfy_bridge.cli import tenants as tenancy_cli
from comfy_bridge.cli.demo_models import ensure_demo_models
from comfy_bridge.cli.workspace_args import describe_workspace, open_workspace

if TYPE_CHECKING:
    from cluster.control.head import Head
    from cluster.executor.local_cluster import LocalCluster

log = logging.getLogger("comfy_cluster")


def state_db_choice(args: argparse.Namespace) -> str | bool | None:
    """--state-db, else $COMFY_CLUSTER_STATE_DB, else the workspace's file (True). "memory" keeps the queue
    and history in the process, as ComfyUI does: suites that restart the server expect them gone."""
    value = args.state_db or os.environ.get("COMFY_CLUSTER_STATE_DB") or True
    return None if value == "memory" else value


def head_address_refusal(args: argparse.Namespace, ws) -> str | None:
    """Why `--head-address` may not be used as given (None: it may): it must be tcp://IP:PORT, and an
    address other machines can reach needs a tenant or --insecure-open, as --listen does."""
    address = args.head_address
    if not address.startswith("tcp://") or ":" not in address[len("tcp://") :]:
        return f"--head-address {address}: give tcp://IP:PORT"
    host = address[len("tcp://") :].rsplit(":", 1)[0].strip("[]")
    from comfy_bridge.tenancy.server import is_loopback

    if is_loopback(host) or args.insecure_open:
        return None
    from pathlib import Path

    from comfy_bridge.tenancy.store import DB_NAME, Store

    db = state_db_choice(args)
    store = Store(Path(db) if db not in (None, True) else ws.root / DB_NAME)
    try:
        if store.has_tenants():
            return None
    finally:
        store.close()
    return (
        f"refusing --head-address {address} with no tenant: executors could join from other machines "
        "while the HTTP side is open to anyone there. Add a tenant (`comfy-cluster tenants add NAME`) "
        "or pass --insecure-open."
    )


def apply_machine_defaults(args: argparse.Namespace) -> None:
    """Fill in the executors, threads per executor and prompts in flight that no flag set, chosen from the
    machine (cli_args.choose_defaults), and say in one log line what was chosen. Not with --ray, which
    places its executors per Ray node (one prompt at a time there unless --concurrent-prompts says)."""
    if args.ray:
        args.concurrent_prompts = args.concurrent_prompts or 1
        return
    gpus = 0
    if not args.cpu and args.executor_device != "cpu":  # asks torch: only where executors may run on GPUs
        gpus = sum(
            d.startswith("cuda")
            for d in cli_args.executor_devices(argparse.Namespace(**{**vars(args), "executors": None}))
        )
    hardware = cli_args.find_hardware(gpus)
    given = {
        "--executors": args.executors,
        "--executor-threads": args.executor_threads or None,
        "--concurrent-prompts": args.concurrent_prompts,
    }
    chosen = cli_args.choose_defaults(hardware, *given.values())
    args.executors = chosen.executors
    if args.executors:  # in-process ModelFns (--executors 0) keep torch's own thread count unless given
        args.executor_threads = chosen.executor_threads
    args.concurrent_prompts = chosen.concurrent_prompts
    flags = [flag for flag, value in given.items() if value is not None]
    log.info(
        "machine: %d CPU cores, %d GPUs, %.1f GiB: %d executor(s) x %s thread(s), %d prompt(s) at once (%s)",
        hardware.cpus,
        hardware.gpus,
        hardware.memory_bytes / (1 << 30),
        chosen.executors,
        args.executor_threads or "torch's",
        chosen.concurrent_prompts,
        "set by " + ", ".join(flags) if flags else "chosen from the machine; flags override",
    )


def executor_threads(args: argparse.Namespace, devices: list[str]) -> int:
    return args.executor_threads or max(1, (os.cpu_count() or 1) // max(1, len(devices)))


def start_executors_early(args: argparse.Namespace) -> LocalCluster | None:
    """The local executor processes, started before this process imports torch and the server (2-3 s on
    2 CPUs) so that they import the model code meanwhile; they connect to the head once it listens at
    the ipc:// address fixed here (start_cluster_in_background). None where the cluster starts otherwise:
    --ray, --head-address, --data-plane (which the executors take from an environment set later), or
    no local executor."""
    if args.ray or args.head_address or args.data_plane:
        return None
    devices = cli_args.executor_devices(args)  # asks torch only with --executor-device cuda or auto
    if not devices:
        return None
    from cluster.executor.local_cluster import HeadContact, LocalCluster
    from cluster.executor.options import default_address
    from nodes.workspace import child_process_env

    # the executors open this workspace: its model folders and configs
    return LocalCluster(
        HeadContact(default_address()),
        len(devices),
        executor_threads(args, devices),
        None,
        (),
        devices,
        restart=True,
        env=child_process_env(),
        warm_up=True,
        supervise=False,
    )


# How long `serve`'s local executors may take to start and register; it listens meanwhile
EXECUTOR_START_S = 120.0


def stop_unless_registered(head: Head, n: int, failed: threading.Event) -> threading.Thread:
    """`serve` listens while its local executors import their model code (a prompt posted meanwhile waits
    in the head's queue and starts the moment one registers); if fewer than `n` have registered after
    EXECUTOR_START_S, the server stops as a failed start: `failed` set, SIGTERM to this process."""

    def watch() -> None:
        try:
            head.wait_for_executors(n, timeout=EXECUTOR_START_S)
        except TimeoutError as err:
            log.error("%s: stopping (the executors' output is above)", err)
            failed.set()
            os.kill(os.getpid(), signal.SIGTERM)

    watcher = threading.Thread(target=watch, name="executor-start-watch", daemon=True)
    watcher.start()
    return watcher


def start_cluster_in_background(
    args: argparse.Namespace,
    secret: bytes | None = None,
    started: LocalCluster | None = None,
    failed: threading.Event | None = None,
) -> Future | None:
    """The local cluster of `serve --executors N`, started on a thread so that its executor processes boot
    while this process imports the nodes and starts listening: the future resolves once the head listens,
    before the executors register (stop_unless_registered sets `failed` if they never do). With
    --head-address the head listens there and takes executors that know `secret` (none local with
    --executors 0). `started`: the executor processes, started already (start_executors_early). The
    future resolves to (head, runtime)."""
    if args.ray:
        return start_ray_in_background(args, secret)
    devices = started.devices if started is not None else cli_args.executor_devices(args)
    if not devices and not args.head_address:
        return None
    if args.executor_device == "cpu" and not args.cpu:
        import torch

        if torch.cuda.is_available():
            log.warning(
                "executors run on the CPU; `--executor-device cuda` puts them on the %d GPU(s), "
                "a path that has not run on a GPU yet (see the README)",
                torch.cuda.device_count(),
            )
    from cluster.executor.local_cluster import start_local_cluster
    from nodes.workspace import child_process_env

    executor_env = child_process_env()  # the executors open this workspace: its model folders and configs
    threads = executor_threads(args, devices)

    def start():
        head, runtime = start_local_cluster(
            len(devices),
            threads,
            devices=devices,
            env=executor_env,
            warm_up=True,
            started=started,
            wait_s=None,
            **head_options(args, secret),
        )
        stop_unless_registered(head, len(devices), failed or threading.Event())
        if args.head_address:
            log.info(
                "executors join from other machines with: comfy-cluster executor --head %s "
                "--workspace DIR (DIR holding a copy of %s, or COMFY_CLUSTER_SECRET set)",
                head.address,
                "cluster.secret",
            )
        return head, runtime

    return in_background(start, "local-cluster-start")


def start_ray_in_background(args: argparse.Namespace, secret: bytes | None) -> Future:
    """`serve --ray`: the head on --head-address, its executors placed on the Ray cluster's nodes."""
    from cluster.executor.ray_executors import start_ray_cluster
    from nodes.workspace import child_process_env

    def start():
        per_node = 1 if args.executors is None else args.executors
        return start_ray_cluster(
            None if args.ray == "local" else args.ray,
            device=args.executor_device,
            per_node=per_node,
            threads=args.executor_threads,
            env=child_process_env(),
            host_per_node=args.ray_nodes_as_hosts,
            autoscale=ray_autoscale(args),
            **head_options(args, secret),
        )

    return in_background(start, "ray-cluster-start")


def ray_autoscale(args: argparse.Namespace):
    """--ray-autoscale LOW:HIGH as cluster.executor.ray_executors.Autoscale (None without it)."""
    if not args.ray_autoscale:
        return None
    bounds = re.fullmatch(r"(\d+):(\d+)", args.ray_autoscale)
    if bounds is None or not 0 <= int(bounds[1]) <= int(bounds[2]) or int(bounds[2]) == 0:
        raise ValueError(
            f"--ray-autoscale {args.ray_autoscale}: give LOW:HIGH, whole numbers with LOW at most "
            "HIGH and HIGH at least 1"
        )
    if not args.ray:
        raise ValueError("--ray-autoscale needs --ray")
    from cluster.executor.ray_executors import Autoscale

    return Autoscale(int(bounds[1]), int(bounds[2]), args.ray_keepalive)


def max_batch(args: argparse.Namespace) -> int:
    """--max-batch, else the prompts in flight per local executor, rounded up: with no more prompts than
    executors each executor runs one prompt's steps, and a batch would only leave another executor idle."""
    if args.max_batch is not None:
        return args.max_batch
    prompts = args.concurrent_prompts or 1  # before the machine's defaults are applied: one at a time
    return max(1, -(-prompts // max(1, len(cli_args.executor_devices(args)))))


def head_options(args: argparse.Namespace, secret: bytes | None) -> dict:
    """The head's options from serve's flags."""
    options: dict = {
        "policy": args.scheduler,
        "max_batch": max_batch(args),
        "batch_window_s": args.batch_window_ms / 1000,
    }
    if args.head_address:
        options.update(address=args.head_address, secret=secret)
    if args.fairness_slack is not None:
        options["delta"] = args.fairness_slack
    if args.no_warm_wait:
        from cluster.scheduling.warm_wait import WarmWaitPolicy

        options["warm_wait"] = WarmWaitPolicy(enabled=False)
    return options


def in_background(start, name: str) -> Future:
    """Run `start()` -> (head, runtime) on a thread, so that executors boot while this process imports the
    nodes; the head follows the cascade controller's decisions. The future resolves to (head, runtime)."""
    future: Future = Future()

    def run() -> None:
        try:
            head, runtime = start()
            from cluster.cascade.head_hook import follow_head
            from nodes.cascade_nodes import checkpoint_model_key

            follow_head(head, checkpoint_model_key)  # cascade decisions set the batch sizes of their models
            future.set_result((head, runtime))
        except BaseException as err:  # re-raised in cmd_serve by future.result()
            future.set_exception(err)

    threading.Thread(target=run, name=name, daemon=True).start()
    return future


def ray_head_address(ray: str) -> str:
    """Where the head listens for executors on Ray nodes when --head-address is not given: loopback for a
    local Ray, else this machine's address on the route to the Ray cluster (any free port)."""
    if ray == "local":
        return "tcp://127.0.0.1:*"
    from cluster.dataplane import remote

    host = ray.split("://", 1)[-1].rsplit(":", 1)[0] if ray != "auto" else ""
    return f"tcp://{remote.local_ip(host)}:*"


# How long torch's idle OpenMP threads spin before they sleep (libgomp's default: 300,000 spins). Where other
# processes hold the cores, a thread spinning at a barrier keeps the one it waits for off its core: on 2
# CPUs at load average 2-3 the demo's 20 tiny steps then took 14-26 s instead of 0.7 s; 10,000 spins made
# no difference to small kernels when the cores were free (0.82-0.84 ms vs 0.72-0.89 ms, docs/benchmarks.md).
GOMP_SPINCOUNT = "10000"


def cmd_serve(args: argparse.Namespace) -> int:
    # before torch is imported here or in an executor (they inherit it); a value the user set wins
    os.environ.setdefault("GOMP_SPINCOUNT", GOMP_SPINCOUNT)
    # No cyclic collection while the server starts: its imports (torch, the server, with --executors 0 the
    # model code) make hundreds of thousands of objects that the collector walked again and again to free
    # almost nothing (a third of the imports' time). The server turns it on once it listens (run_server).
    gc.disable()
    try:
        return _serve(args)
    except KeyboardInterrupt:  # Ctrl-C while starting, before the server takes the signal itself
        log.info("interrupted")
        return 130


def _serve(args: argparse.Namespace) -> int:
    ws = open_workspace(args)
    for line in describe_workspace(ws):
        log.info("%s", line)
    secret = None
    try:
        ray_autoscale(args)
    except ValueError as err:
        log.error("%s", err)
        return 2
    if args.ray and importlib.util.find_spec("ray") is None:
        log.error(
            "--ray needs Ray in this environment: pip install 'comfy-cluster[ray]' (the Ray version the "
            "cluster's nodes run)"
        )
        return 2
    if args.ray and not args.head_address:
        args.head_address = ray_head_address(args.ray)
    if args.head_address:
        refusal = head_address_refusal(args, ws)
        if refusal:
            log.error("%s", refusal)
            return 2
        from cluster.secret import ensure_secret

        secret = ensure_secret(ws.root)
    apply_machine_defaults(args)
    started = start_executors_early(args)
    ensure_demo_models(ws)
    from cluster.dataplane import remote

    if args.data_plane:
        remote.set_mode(args.data_plane)  # this process's pulls, and its local executors' (environment)
    from cluster.executor.reclaim import reclaim_dead

    reclaim_dead()  # the segments and sockets of servers and executors that were killed
    start_failed = threading.Event()
    cluster = start_cluster_in_background(args, secret, started, start_failed)
    from comfy_bridge.server.app import ServerConfig, run_server

    cache_type, cache_size = cli_args.cache_mode(args)
    from nodes import image_io, previews

    previews.set_method(args.preview_method, args.preview_size)
    image_io.set_metadata_enabled(not args.disable_metadata)
    config = ServerConfig(
        listen=args.listen,
        port=args.port,
        workspace=ws,
        enable_cors_header=args.enable_cors_header,
        max_upload_size=args.max_upload_size,
        front_end_root=args.front_end_root,
        multi_user=args.multi_user,
        cache_type=cache_type,
        cache_size=cache_size,
        quick_test_for_ci=args.quick_test_for_ci,
        disable_custom_nodes=args.disable_all_custom_nodes,
        whitelist_custom_nodes=args.whitelist_custom_nodes,
        disable_metadata=args.disable_metadata,
        disable_assets=args.disable_assets,
        preview_method=args.preview_method,
        dont_print_server=args.dont_print_server,
        tls_keyfile=args.tls_keyfile,
        tls_certfile=args.tls_certfile,
        state_db=state_db_choice(args),
        insecure_open=args.insecure_open,
        allowed_hosts=tuple(args.allowed_hosts),
        concurrent_prompts=args.concurrent_prompts,
        **tenancy_cli.prompt_limits(args),
    )
    if cluster is not None:
        head, runtime = cluster.result()
    else:  # --executors 0: in-process, through the same executor core, batching as --max-batch says
        from cluster.local import default_local_runtime
        from cluster.modelfn import warm_up_all

        head, runtime = None, default_local_runtime(max_batch(args), args.batch_window_ms / 1000)
        # the in-process ModelFns compute as one executor of that many threads would; node bodies as in a head
        runtime.threads = args.executor_threads or None
        # The model code is imported before the server listens, not in the first prompt. Not on a thread
        # beside the server: diffusers' and transformers' lazy modules are not safe to import from two
        # threads at once (a node body importing one while the warm-up does fails with a KeyError).
        t0 = time.perf_counter()
        log.info("%d ModelFns warmed up in %.1f s", len(warm_up_all()), time.perf_counter() - t0)
    if head is not None:
        config.cluster_head = head
        config.scheduler = head  # tenants' fair-share weights

    def make_executor(server):
        from comfy_bridge.execution import PromptExecutor

        return PromptExecutor(server.registry, server, cache_type=cache_type, cache_size=cache_size, runtime=runtime)

    from comfy_bridge.tenancy.server import InsecureListen

    try:
        run_server(config, executor_factory=make_executor)
    except InsecureListen as err:
        log.error("%s", err)
        return 2
    finally:
        if head is not None:
            head.stop()
    return 1 if start_failed.is_set() else 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    serve = sub.add_parser("serve", help="start the ComfyUI-compatible server and its executors")
    cli_args.add_comfyui_flags(serve)
    cli_args.add_cluster_flags(serve)
    serve.add_argument(
        "--no-warm-wait",
        action="store_true",
        help="always load a model's weights on the free executor chosen, never wait for a "
        "busy executor that holds them (warm wait is on by default)",
    )
    tenancy_cli.add_serve_flags(serve)
    serve.set_defaults(func=cmd_serve)
