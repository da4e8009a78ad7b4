"""`comfy-cluster nodes install | list | disable | enable`: the workspace's custom node packs, managed
the way ComfyUI-Manager does (comfy_bridge.packs.manage does the work)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from comfy_bridge.cli.flags import shared_options
from comfy_bridge.compat.workspace_entry_points import write_entry_points
from comfy_bridge.packs.manage import PackError, install_pack, list_packs, set_enabled
from comfy_bridge.packs.pip_guard import RequirementsError, TorchReplacement
from nodes.workspace import Workspace, default_workspace


def _workspace(args: argparse.Namespace) -> Workspace:
    ws = Workspace(Path(args.workspace or default_workspace())).create()
    write_entry_points(ws.root)
    return ws


def cmd_install(args: argparse.Namespace) -> int:
    ws = _workspace(args)
    notes: list[str] = []
    try:
        entry, installed = install_pack(
            ws,
            args.source,
            requirements=not args.skip_requirements,
            pip_args=args.pip_arg or (),
            notes=notes,
            install_script=not args.skip_install_script,
        )
    except (PackError, RequirementsError) as err:
        print(f"{'refused' if isinstance(err, TorchReplacement) else 'error'}: {err}", file=sys.stderr)
        for note in notes:
            print(f"  note: {note}", file=sys.stderr)
        return 1
    print(f"installed {entry.name} into {entry.path}")
    for requirement in installed:
        print(f"  pip installed {requirement}")
    if entry.path.is_dir() and (entry.path / "install.py").is_file():
        print(
            f"  {'skipped' if args.skip_install_script or args.skip_requirements else 'ran'} "
            f"{entry.path / 'install.py'}"
        )
    for note in notes:
        print(f"  warning: {note}", file=sys.stderr)
    print("restart the server to load it")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from comfy_bridge.packs.cluster_pack import PACK_NAME, node_names

    ws = _workspace(args)
    print(f"{PACK_NAME}\tbuilt in\t{', '.join(node_names())}")
    for entry in list_packs(ws):
        state = "enabled" if entry.enabled else "disabled"
        print(f"{entry.name}\t{state}\t{entry.origin or entry.path}")
    return 0


def cmd_enable(args: argparse.Namespace, enabled: bool) -> int:
    try:
        entry = set_enabled(_workspace(args), args.name, enabled)
    except PackError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(f"{entry.name} {'enabled' if enabled else 'disabled'} ({entry.path}); restart the server to apply")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """`comfy-cluster nodes ...`"""
    nodes = sub.add_parser("nodes", help="install, list, disable and enable custom node packs")
    common = shared_options(nodes, lambda p: p.add_argument("--workspace", help="the workspace whose packs to manage"))
    actions = nodes.add_subparsers(dest="nodes_command", required=True)
    install = actions.add_parser("install", parents=[common], help="install a pack from a folder, .py file or git URL")
    install.add_argument("source", help="a local pack folder or .py file, or a git URL")
    install.add_argument(
        "--skip-requirements", action="store_true", help="do not pip install requirements.txt (nor run install.py)"
    )
    install.add_argument(
        "--skip-install-script", action="store_true", help="do not run the pack's install.py (ComfyUI-Manager runs it)"
    )
    install.add_argument(
        "--pip-arg",
        action="append",
        help="an extra argument for pip, repeatable; write options as --pip-arg=--no-index",
    )
    install.set_defaults(func=cmd_install)
    listing = actions.add_parser("list", parents=[common], help="list the packs and whether they are enabled")
    listing.set_defaults(func=cmd_list)
    for verb, enabled in (("disable", False), ("enable", True)):
        action = actions.add_parser(verb, parents=[common], help=f"{verb} a pack (renames it, as ComfyUI-Manager does)")
        action.add_argument("name")
        action.set_defaults(func=lambda args, enabled=enabled: cmd_enable(args, enabled))
