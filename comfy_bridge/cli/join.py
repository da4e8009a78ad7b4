"""`comfy-cluster executor --head tcp://HOST:PORT`: one executor joining a running head, from any machine.

    comfy-cluster executor --head tcp://10.0.0.5:7000 --device cuda:0 --workspace /srv/comfy

It opens the workspace (its model folders are where this machine finds the files the head's ModelRefs
name), proves it knows the cluster secret (`COMFY_CLUSTER_SECRET`, else `cluster.secret` in the
workspace: copy the head's file), and serves its outputs to executors on other hosts over its data
socket. It runs until SIGTERM / Ctrl-C, or until the head retires it (scaling in); when the head stops it
waits for it to come back and joins again (`--exit-with-head`: it stops too). A head that refuses it (no
secret, or a wrong one) ends it with exit code 2.
"""

from __future__ import annotations

import argparse
import gc

from comfy_bridge.cli.workspace_args import open_workspace


def cmd_executor(args: argparse.Namespace) -> int:
    gc.disable()  # until it is warm, as `python -m cluster.executor` starts (run_executor turns it back on)
    from cluster import secret as cluster_secret
    from cluster.executor.process import run_executor

    ws = open_workspace(args)
    args.rejoin = not args.exit_with_head
    return run_executor(args, cluster_secret.read_secret(ws.root))


def add_parser(sub: argparse._SubParsersAction) -> None:
    from cluster.executor.process import add_arguments

    p = sub.add_parser(
        "executor", help="join a running head as one executor (from any machine)", description=__doc__.split("\n\n")[0]
    )
    add_arguments(p)
    p.add_argument(
        "--workspace",
        default=None,
        help="workspace folder: its models, and its cluster.secret unless COMFY_CLUSTER_SECRET is set "
        "(default: the platform data dir)",
    )
    p.add_argument(
        "--exit-with-head",
        action="store_true",
        help="stop when the head stops (default: wait for it to come back and join it again)",
    )
    p.set_defaults(func=cmd_executor)
