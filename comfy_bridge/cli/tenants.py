"""`comfy-cluster tenants ...`: add, set, list, key, revoke, remove, usage; and the serve flags of
a hosted server. Works on the store file while the server runs (SQLite WAL)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from comfy_bridge.cli.flags import shared_options
from comfy_bridge.server.config import DEFAULT_MAX_PROMPT_BYTES, DEFAULT_MAX_TEXT_CHARS
from comfy_bridge.tenancy.store import DB_NAME, LIMITS, Store, StoreError


def add_serve_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--state-db",
        default=None,
        metavar="PATH",
        help=f"SQLite file of the queue, history, tenants and keys (default: <workspace>/{DB_NAME})",
    )
    p.add_argument(
        "--insecure-open",
        action="store_true",
        help="allow listening on a non-loopback address with no tenant (anyone can use the server)",
    )
    p.add_argument(
        "--allowed-hosts",
        action="extend",
        type=_names,
        default=[],
        metavar="NAMES",
        help="Host names the server answers besides IP addresses, localhost and the --listen names "
        "(comma separated; '.example.com' admits subdomains, '*' any name): DNS rebinding protection",
    )

    p.add_argument(
        "--max-prompt-bytes",
        type=int,
        default=DEFAULT_MAX_PROMPT_BYTES,
        metavar="N",
        help="largest POST /prompt body; larger ones get 413 (default %(default)s; 0: no limit; "
        "a tenant's own limit replaces it)",
    )
    p.add_argument(
        "--max-text-chars",
        type=int,
        default=DEFAULT_MAX_TEXT_CHARS,
        metavar="N",
        help="longest string in a prompt's nodes (text encoders' cost grows with it); longer ones get "
        "413 (default %(default)s; 0: no limit; a tenant's own limit replaces it)",
    )


def prompt_limits(args: argparse.Namespace) -> dict[str, int | None]:
    """The ServerConfig fields of --max-prompt-bytes and --max-text-chars (0 or less: no limit)."""
    limits = {"max_prompt_bytes": args.max_prompt_bytes, "max_text_chars": args.max_text_chars}
    return {name: value if value > 0 else None for name, value in limits.items()}


def _names(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def _add_limit_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--weight", type=float, default=None, help="fair-share weight (vTime is divided by it)")
    p.add_argument(
        "--admin",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="an operator: reads every tenant's usage, /metrics and /cluster/stats",
    )
    for name in LIMITS:
        p.add_argument("--" + name.replace("_", "-"), type=int, default=None, dest=name, metavar="N")


def _store_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workspace", help="the workspace whose store to manage (default: the user's workspace)")
    p.add_argument("--state-db", metavar="PATH", help=f"the store file itself (default: <workspace>/{DB_NAME})")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tenants", help="manage the tenants and API keys of a hosted server")
    common = [shared_options(p, _store_flags)]
    actions = p.add_subparsers(dest="action", required=True)
    add = actions.add_parser("add", parents=common, help="add a tenant")
    add.add_argument("name")
    _add_limit_flags(add)
    change = actions.add_parser("set", parents=common, help="change a tenant's weight or limits (0 removes a limit)")
    change.add_argument("name")
    _add_limit_flags(change)
    actions.add_parser("list", parents=common, help="list tenants, their limits and keys")
    key = actions.add_parser("key", parents=common, help="create an API key (printed once, stored only as a hash)")
    key.add_argument("name")
    revoke = actions.add_parser(
        "revoke", parents=common, help="revoke a tenant's keys (all, or --key ID) and its sessions"
    )
    revoke.add_argument("name")
    revoke.add_argument("--key", default=None, metavar="ID")
    remove = actions.add_parser(
        "remove", parents=common, help="remove a tenant, its keys and queued prompts (files are kept)"
    )
    remove.add_argument("name")
    usage = actions.add_parser("usage", parents=common, help="a tenant's accounted GPU seconds, prompts and images")
    usage.add_argument("name")
    p.set_defaults(func=run)


def open_store(args: argparse.Namespace) -> Store:
    if args.state_db:
        return Store(Path(args.state_db))
    from comfy_bridge.cli.workspace_args import open_workspace

    return Store(open_workspace(args).root / DB_NAME)


def run(args: argparse.Namespace) -> int:
    store = open_store(args)
    limits = {name: getattr(args, name, None) for name in LIMITS}
    try:
        if args.action == "add":
            given = {k: v for k, v in limits.items() if v is not None}
            tenant = store.add_tenant(args.name, 1.0 if args.weight is None else args.weight, bool(args.admin), **given)
            print(json.dumps(tenant.as_dict()))
        elif args.action == "set":
            given = {k: v for k, v in limits.items() if v is not None}
            print(json.dumps(store.update_tenant(args.name, args.weight, args.admin, **given).as_dict()))
        elif args.action == "list":
            keys = store.list_keys()
            for tenant in store.list_tenants():
                mine = [k["id"] + (" (revoked)" if k["revoked"] else "") for k in keys if k["tenant"] == tenant.name]
                print(json.dumps({**tenant.as_dict(), "keys": mine}))
        elif args.action == "key":
            print(store.create_key(args.name))
        elif args.action == "revoke":
            if store.get_tenant(args.name) is None:
                raise StoreError(f"no tenant {args.name!r}")
            print(f"revoked {store.revoke(args.name, args.key)} key(s)")
        elif args.action == "remove":
            store.remove_tenant(args.name)
        elif args.action == "usage":
            print(json.dumps({"tenant": args.name, **store.usage(args.name)}))
    except StoreError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    finally:
        store.close()
    return 0
