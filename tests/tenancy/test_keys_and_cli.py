"""API keys are stored only as scrypt hashes, checked against the hash, and revocable; the
`comfy-cluster tenants` commands manage them; a non-loopback server with no tenant refuses to start."""

from __future__ import annotations

import hashlib
import sqlite3

import pytest

from comfy_bridge.cli import main
from comfy_bridge.server import ServerConfig
from comfy_bridge.tenancy import keys
from comfy_bridge.tenancy.server import InsecureListen, check_listen
from comfy_bridge.tenancy.store import Store, StoreError


def test_keys_are_hashed_verified_and_revocable(tmp_path):
    store = Store(tmp_path / "s.db", scrypt_n=2**10)
    store.add_tenant("alice")
    key = store.create_key("alice")
    key_id, secret = keys.split_key(key)
    raw = sqlite3.connect(tmp_path / "s.db").execute("SELECT id, salt, hash, n FROM api_keys").fetchall()
    assert len(raw) == 1 and raw[0][0] == key_id
    _, salt, stored, n = raw[0]
    assert stored == hashlib.scrypt(secret.encode(), salt=salt, n=n, r=8, p=1, dklen=32)
    dump = b"".join(line.encode() for line in sqlite3.connect(tmp_path / "s.db").iterdump())
    assert secret.encode() not in dump and key.encode() not in dump

    assert store.authenticate_key(key) == ("alice", key_id)
    assert store.authenticate_key(key) == ("alice", key_id)  # second time from the verified cache
    assert store.authenticate_key(key[:-1] + ("A" if key[-1] != "A" else "B")) is None
    assert store.authenticate_key(f"cc_{key_id}_" + "z" * 43) is None
    assert store.authenticate_key("not a key") is None
    other = store.create_key("alice")
    assert store.revoke("alice", key_id) == 1
    assert store.authenticate_key(key) is None
    assert store.authenticate_key(other) is not None  # only the named key went
    with pytest.raises(StoreError):
        store.add_tenant("alice")
    with pytest.raises(StoreError):
        store.add_tenant("../x")


def test_tenants_cli(tmp_path, capsys):
    db = str(tmp_path / "cli.db")
    assert (
        main(["tenants", "--state-db", db, "add", "bob", "--weight", "2", "--max-queued", "3", "--max-concurrent", "1"])
        == 0
    )
    assert main(["tenants", "--state-db", db, "key", "bob"]) == 0
    key = capsys.readouterr().out.strip().splitlines()[-1]
    store = Store(db)
    assert store.authenticate_key(key)[0] == "bob"
    tenant = store.get_tenant("bob")
    assert (tenant.weight, tenant.max_queued, tenant.max_concurrent) == (2.0, 3, 1)
    assert main(["tenants", "--state-db", db, "set", "bob", "--max-queued", "0", "--weight", "3"]) == 0
    assert store.get_tenant("bob").max_queued is None and store.get_tenant("bob").weight == 3.0
    assert main(["tenants", "--state-db", db, "list"]) == 0
    listing = capsys.readouterr().out
    assert '"name": "bob"' in listing and key not in listing
    assert main(["tenants", "--state-db", db, "revoke", "bob"]) == 0
    assert store.authenticate_key(key) is None
    assert main(["tenants", "--state-db", db, "key", "nobody"]) == 1


def test_open_non_loopback_server_refuses_to_start_without_tenants(tmp_path):
    store = Store(tmp_path / "l.db", scrypt_n=2**10)
    check_listen(ServerConfig(listen="127.0.0.1,::1,localhost"), store)
    with pytest.raises(InsecureListen):
        check_listen(ServerConfig(listen="0.0.0.0,::"), store)
    check_listen(ServerConfig(listen="0.0.0.0", insecure_open=True), store)
    store.add_tenant("alice")
    check_listen(ServerConfig(listen="0.0.0.0"), store)
