"""The `comfy-cluster` command: serve, run, demo-models."""
from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Sequence

from comfy_bridge import args as cli_args
from comfy_bridge.packs import manage as nodes_cli
from comfy_bridge.tenancy import cli as tenancy_cli
from nodes.workspace import Workspace, activate, default_workspace

log = logging.getLogger("comfy_cluster")


def open_workspace(args: argparse.Namespace) -> Workspace:
    """The workspace the flags describe (ComfyUI's directory flags override its subfolders)."""
    root = getattr(args, "workspace", None) or getattr(args, "base_directory", None) or default_workspace()
    ws = Workspace(Path(root),
                   output_dir=getattr(args, "output_directory", None),
                   input_dir=getattr(args, "input_directory", None),
                   temp_dir=getattr(args, "temp_directory", None),
                   user_dir=getattr(args, "user_directory", None)).create()
    for group in getattr(args, "extra_model_paths_config", None) or []:
        for config in group:
            ws.load_extra_model_paths(Path(config))
    return activate(ws)


def ensure_demo_models(ws: Workspace) -> None:
    """First start on an empty workspace: build the tiny demo models (and the example input image
    the img2img and ControlNet workflows load) so a workflow runs with no download."""
    example = ws.input_dir / "example.png"
    if not example.exists():
        write_example_image(example)
    if ws.list_files("checkpoints"):
        return
    from nodes.models.demo import build_demo_models
    log.info("no checkpoint in %s: building the demo models", ws.models_dir)
    build_demo_models(ws.models_dir)


def write_example_image(path: Path, size: int = 128) -> None:
    """A deterministic picture: a colour gradient with a disc, enough structure for img2img and ControlNet."""
    import numpy as np
    from PIL import Image

    from nodes.output_claims import write_atomic
    y, x = np.mgrid[0:size, 0:size] / (size - 1)
    disc = ((x - 0.5) ** 2 + (y - 0.5) ** 2 < 0.09).astype(float)
    rgb = np.stack([x, y, 0.5 * (1 - disc) + disc], axis=-1)
    write_atomic(path, lambda tmp: Image.fromarray((rgb * 255).round().astype("uint8")).save(tmp, format="PNG"))


def cmd_demo_models(args: argparse.Namespace) -> int:
    ws = open_workspace(args)
    from nodes.models.demo import build_demo_models
    for path in build_demo_models(ws.models_dir):
        print(path)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    ws = open_workspace(args)
    ensure_demo_models(ws)
    from comfy_bridge.run import run_workflow_file
    if args.threads:
        from cluster.local import set_threads
        set_threads(args.threads)
    images = run_workflow_file(Path(args.workflow), ws, seed=args.seed, progress=not args.quiet)
    for image in images:
        print(image)
    return 0 if images else 1


def state_db_choice(args: argparse.Namespace) -> str | bool | None:
    """--state-db, else $COMFY_CLUSTER_STATE_DB, else the workspace's file (True). "memory" keeps the queue
    and history in the process, as ComfyUI does: suites that restart the server expect them gone."""
    value = args.state_db or os.environ.get("COMFY_CLUSTER_STATE_DB") or True
    return None if value == "memory" else value


def start_cluster_in_background(args: argparse.Namespace) -> Future | None:
    """The local cluster of `serve --executors N`, started on a thread so that its executor processes boot
    while this process imports the nodes: clients that give a new server ~20 s (ComfyUI's test suites)
    see it listening sooner. The future resolves to (head, runtime)."""
    devices = cli_args.executor_devices(args)
    if not devices:
        return None
    if args.executor_device == "cpu" and not args.cpu:
        import torch
        if torch.cuda.is_available():
            log.warning("executors run on the CPU; `--executor-device cuda` puts them on the %d GPU(s), "
                        "a path that has not run on a GPU yet (see the README)", torch.cuda.device_count())
    from cluster.local_cluster import start_local_cluster
    from nodes.workspace import child_process_env
    executor_env = child_process_env()   # the executors open this workspace: its model folders and configs
    threads = args.executor_threads or max(1, (os.cpu_count() or 1) // len(devices))
    head_options = {"policy": args.scheduler, "max_batch": args.max_batch,
                    "batch_window_s": args.batch_window_ms / 1000}
    if args.fairness_slack is not None:
        head_options["delta"] = args.fairness_slack
    if args.no_warm_wait:
        from cluster.warm_wait import WarmWaitPolicy
        head_options["warm_wait"] = WarmWaitPolicy(enabled=False)
    future: Future = Future()

    def start() -> None:
        try:
            head, runtime = start_local_cluster(len(devices), threads, devices=devices, env=executor_env,
                                                **head_options)
            from cluster.cascade.head_hook import follow_head
            from nodes.cascade_nodes import checkpoint_model_key
            follow_head(head, checkpoint_model_key)   # cascade decisions set the batch sizes of their models
            future.set_result((head, runtime))
        except BaseException as err:  # re-raised in cmd_serve by future.result()
            future.set_exception(err)
    threading.Thread(target=start, name="local-cluster-start", daemon=True).start()
    return future


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        return _serve(args)
    except KeyboardInterrupt:   # Ctrl-C while starting, before the server takes the signal itself
        log.info("interrupted")
        return 130


def _serve(args: argparse.Namespace) -> int:
    ws = open_workspace(args)
    ensure_demo_models(ws)
    from cluster.reclaim import reclaim_dead
    reclaim_dead()   # the segments and sockets of servers and executors that were killed
    cluster = start_cluster_in_background(args)
    from comfy_bridge.server.app import ServerConfig, run_server
    cache_type, cache_size = cli_args.cache_mode(args)
    from nodes import image_io, previews
    previews.set_method(args.preview_method, args.preview_size)
    image_io.set_metadata_enabled(not args.disable_metadata)
    config = ServerConfig(
        listen=args.listen, port=args.port, workspace=ws, enable_cors_header=args.enable_cors_header,
        max_upload_size=args.max_upload_size, front_end_root=args.front_end_root, multi_user=args.multi_user,
        cache_type=cache_type, cache_size=cache_size, quick_test_for_ci=args.quick_test_for_ci,
        disable_custom_nodes=args.disable_all_custom_nodes, whitelist_custom_nodes=args.whitelist_custom_nodes,
        disable_metadata=args.disable_metadata, preview_method=args.preview_method,
        dont_print_server=args.dont_print_server, tls_keyfile=args.tls_keyfile, tls_certfile=args.tls_certfile,
        state_db=state_db_choice(args), insecure_open=args.insecure_open, allowed_hosts=tuple(args.allowed_hosts),
        concurrent_prompts=args.concurrent_prompts, **tenancy_cli.prompt_limits(args))
    head, runtime = cluster.result() if cluster is not None else (None, None)
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
    return 0


BENCHMARKS = {
    "engine": "comfy_bridge.bench.engine",
    "dispatch": "cluster.bench_dispatch",
    "dataplane": "cluster.bench_dataplane",
    "cluster": "comfy_bridge.bench.workflow",
    "cascade": "cluster.cascade.bench",
    "batching": "comfy_bridge.bench.batching",
    "report": "cluster.sim.report",
    "realcheck": "cluster.sim.realcheck",
    "tenants-load": "comfy_bridge.tenancy.bench_load",
}


def cmd_bench(args: argparse.Namespace) -> int:
    import importlib
    return importlib.import_module(BENCHMARKS[args.name]).main(args.bench_args)


def cmd_simulate(args: argparse.Namespace) -> int:
    from cluster.sim.cli import main as simulate_main
    return simulate_main(args.sim_args)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="comfy-cluster", description="Serve ComfyUI workflows on a cluster.")
    sub = p.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="start the ComfyUI-compatible server and its executors")
    cli_args.add_comfyui_flags(serve)
    cli_args.add_cluster_flags(serve)
    serve.add_argument("--no-warm-wait", action="store_true",
                       help="always load a model's weights on the free executor chosen, never wait for a "
                            "busy executor that holds them (warm wait is on by default)")
    tenancy_cli.add_serve_flags(serve)
    serve.set_defaults(func=cmd_serve)

    run = sub.add_parser("run", help="run a workflow file (API or UI format) and write its images")
    run.add_argument("workflow")
    run.add_argument("--workspace", default=None)
    run.add_argument("--seed", type=int, default=None, help="override every seed widget")
    run.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    run.add_argument("--quiet", action="store_true")
    run.set_defaults(func=cmd_run)

    demo = sub.add_parser("demo-models", help="build the tiny offline demo models into the workspace")
    demo.add_argument("--workspace", default=None)
    demo.set_defaults(func=cmd_demo_models)
    tenancy_cli.add_parser(sub)
    nodes_cli.add_parser(sub)
    # no options of its own, so every flag reaches cluster.sim.cli (simulate --help included)
    simulate = sub.add_parser("simulate", help="replay a trace on simulated GPUs", add_help=False,
                              prefix_chars="+")
    simulate.add_argument("sim_args", nargs=argparse.REMAINDER)
    simulate.set_defaults(func=cmd_simulate)
    bench = sub.add_parser("bench", help="run a benchmark and print its figures")
    bench.add_argument("name", choices=sorted(BENCHMARKS))
    bench.add_argument("bench_args", nargs=argparse.REMAINDER)
    bench.set_defaults(func=cmd_bench)
    from comfy_bridge.discriminator_cli import add_parser as add_discriminator_parser
    add_discriminator_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "serve":
        args = cli_args.parse_known(parser, argv)
    else:
        args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
