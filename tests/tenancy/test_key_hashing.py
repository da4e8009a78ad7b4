"""New API keys are stored as HMAC-SHA256 of their 256-bit secret (keyed by the row's salt), so a
key's first check costs microseconds instead of scrypt's ~50 ms; keys stored with scrypt by earlier
versions are still accepted."""

from __future__ import annotations

import hashlib
import hmac
import os
import sqlite3

from comfy_bridge.tenancy import keys
from comfy_bridge.tenancy.store import Store


def test_new_keys_are_stored_as_a_keyed_sha256(tmp_path):
    store = Store(tmp_path / "s.db")
    store.add_tenant("alice")
    key = store.create_key("alice")
    key_id, secret = keys.split_key(key)
    ((salt, stored, n),) = sqlite3.connect(tmp_path / "s.db").execute("SELECT salt, hash, n FROM api_keys")
    assert n == keys.HMAC_SHA256 and len(salt) == 16
    assert stored == hmac.new(salt, secret.encode(), hashlib.sha256).digest()
    assert secret.encode() not in b"".join(line.encode() for line in sqlite3.connect(tmp_path / "s.db").iterdump())

    assert Store(tmp_path / "s.db").authenticate_key(key) == ("alice", key_id)  # cold: as a new server process
    assert store.authenticate_key(key[:-1] + ("A" if key[-1] != "A" else "B")) is None
    assert store.authenticate_key(key) == ("alice", key_id)


def test_keys_stored_with_scrypt_by_earlier_versions_still_work(tmp_path):
    store = Store(tmp_path / "s.db")
    store.add_tenant("alice")
    key_id, secret, key = keys.new_key()
    salt = os.urandom(16)
    legacy = hashlib.scrypt(secret.encode(), salt=salt, n=2**10, r=8, p=1, dklen=32)
    store._exec(
        "INSERT INTO api_keys (id, tenant, salt, hash, n, created) VALUES (?, 'alice', ?, ?, ?, 0)",
        (key_id, salt, legacy, 2**10),
    )
    assert Store(tmp_path / "s.db").authenticate_key(key) == ("alice", key_id)
    assert Store(tmp_path / "s.db").authenticate_key(f"cc_{key_id}_" + "z" * 43) is None
