"""API keys and session tokens: generation, scrypt hashing, constant-time checks.

A key reads `cc_<id>_<secret>`: the id finds the row, the secret is verified against its scrypt
hash, so a lookup costs one hash and the database never holds a usable key.
"""
from __future__ import annotations

import hashlib
import hmac
import re
import secrets

PREFIX = "cc_"
_KEY = re.compile(r"^cc_([A-Za-z0-9]{12})_([A-Za-z0-9_-]{32,64})$")
# scrypt cost: n=2**14, r=8 uses 16 MiB and ~50 ms; tests pass a lower n.
DEFAULT_SCRYPT_N = 2 ** 14


def new_key() -> tuple[str, str, str]:
    """(key_id, secret, full key)."""
    key_id = secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)
    return key_id, secret, f"{PREFIX}{key_id}_{secret}"


def split_key(key: str) -> tuple[str, str] | None:
    match = _KEY.match(key.strip())
    return (match.group(1), match.group(2)) if match else None


def hash_secret(secret: str, salt: bytes, n: int = DEFAULT_SCRYPT_N) -> bytes:
    return hashlib.scrypt(secret.encode(), salt=salt, n=n, r=8, p=1, maxmem=64 * 1024 * 1024, dklen=32)


def verify_secret(secret: str, salt: bytes, expected: bytes, n: int = DEFAULT_SCRYPT_N) -> bool:
    return hmac.compare_digest(hash_secret(secret, salt, n), expected)


def new_session_token() -> str:
    return secrets.token_urlsafe(32)


def token_digest(token: str) -> str:
    """Session tokens are 256 random bits: a plain SHA-256 is enough to keep them unusable at rest."""
    return hashlib.sha256(token.encode()).hexdigest()
