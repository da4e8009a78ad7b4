"""The `comfy-cluster` command, the top of the house: the only code that imports all three layers and
installs the hooks between them. One module per subcommand:

    serve        serve.py          the ComfyUI-compatible server and its executors (also `python main.py`)
    executor     join.py           one executor joining a running head, from any machine
    run          run.py            one workflow file in-process, with progress bars
    demo-models  demo_models.py    the tiny offline models
    tenants      tenants.py        tenants, keys and limits of a hosted service
    nodes        packs.py          custom node packs
    simulate     simulate.py       a trace replayed on simulated GPUs
    bench        bench.py          the benchmarks
    discriminator discriminator.py train the cascade's discriminator

flags.py holds ComfyUI's flags and the cluster's; workspace_args.py turns them into a workspace.
The subcommand modules are imported when the parser is built, and `serve` imports only its own: it starts
its executor processes before anything imports torch (see serve.start_executors_early).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from comfy_bridge.cli import flags as cli_args

COMMANDS = ("serve", "join", "run", "demo_models", "tenants", "packs", "simulate", "bench", "discriminator")


def build_parser(commands: Sequence[str] = COMMANDS) -> argparse.ArgumentParser:
    """The parser of the subcommands whose modules `commands` names (all by default)."""
    p = argparse.ArgumentParser(prog="comfy-cluster", description="Serve ComfyUI workflows on a cluster.")
    sub = p.add_subparsers(dest="command", required=True)
    for name in commands:
        importlib.import_module(f"comfy_bridge.cli.{name}").add_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "serve":
        args = cli_args.parse_known(build_parser(["serve"]), argv)
    else:
        args = build_parser().parse_args(argv)
    return args.func(args)
