"""`serve --head-address`: tcp://IP:PORT only, and an address other machines can reach is refused without a
tenant or --insecure-open, as --listen is; `serve` exits with code 2 before starting anything."""

from __future__ import annotations

import pytest

from comfy_bridge.cli import build_parser, main
from comfy_bridge.cli.serve import head_address_refusal
from comfy_bridge.tenancy.store import DB_NAME, Store
from nodes.workspace import Workspace


def _args(*flags: str):
    return build_parser().parse_known_args(["serve", *flags])[0]


@pytest.fixture
def ws(tmp_path):
    return Workspace(tmp_path / "ws").create()


def test_loopback_is_allowed_and_the_format_is_checked(ws):
    assert head_address_refusal(_args("--head-address", "tcp://127.0.0.1:7000"), ws) is None
    assert "give tcp://IP:PORT" in head_address_refusal(_args("--head-address", "10.0.0.5:7000"), ws)


def test_a_reachable_address_needs_a_tenant_or_insecure_open(ws):
    refusal = head_address_refusal(_args("--head-address", "tcp://0.0.0.0:7000"), ws)
    assert refusal and "no tenant" in refusal and "--insecure-open" in refusal
    assert head_address_refusal(_args("--head-address", "tcp://0.0.0.0:7000", "--insecure-open"), ws) is None
    store = Store(ws.root / DB_NAME)
    store.add_tenant("alice")
    store.close()
    assert head_address_refusal(_args("--head-address", "tcp://10.0.0.5:7000"), ws) is None


def test_serve_refuses_before_starting_anything(ws, caplog):
    assert main(["serve", "--workspace", str(ws.root), "--head-address", "tcp://0.0.0.0:7000"]) == 2
    assert any("refusing --head-address" in r.message for r in caplog.records)
    assert not (ws.root / "cluster.secret").exists()
