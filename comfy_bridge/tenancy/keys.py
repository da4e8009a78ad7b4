"""API keys and session tokens: generation, hashing, constant-time checks.

A key reads `cc_<id>_<secret>`: the id finds the row, the secret is verified against its hash, so
a lookup costs one hash and the database never holds a usable key. The secret is 256 random bits,
so a fast keyed hash (HMAC-SHA256 with the row's salt) keeps it unusable at rest as well as a slow
one would: a slow hash only protects secrets short enough to guess, and cost every key's first
check ~50 ms of CPU (20 tenants starting at once queued behind it for over a second). Keys made
by earlier versions keep their scrypt hash (a row's n > 0) and are still accepted.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets

PREFIX = "cc_"
_KEY = re.compile(r"^cc_([A-Za-z0-9]{12})_([A-Za-z0-9_-]{32,64})$")
# The n of a key hashed with HMAC-SHA256; an n > 0 is the scrypt cost of an older key (theirs was
# 2**14, r=8: 16 MiB and ~50 ms a check).
HMAC_SHA256 = 0


def new_key() -> tuple[str, str, str]:
    """(key_id, secret, full key)."""
    key_id = secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)
    return key_id, secret, f"{PREFIX}{key_id}_{secret}"


def split_key(key: str) -> tuple[str, str] | None:
    match = _KEY.match(key.strip())
    return (match.group(1), match.group(2)) if match else None


def hash_secret(secret: str, salt: bytes, n: int = HMAC_SHA256) -> bytes:
    """HMAC-SHA256 keyed by the salt, or scrypt of cost n for n > 0."""
    if n == HMAC_SHA256:
        return hmac.new(salt, secret.encode(), hashlib.sha256).digest()
    return hashlib.scrypt(secret.encode(), salt=salt, n=n, r=8, p=1, maxmem=64 * 1024 * 1024, dklen=32)


def verify_secret(secret: str, salt: bytes, expected: bytes, n: int = HMAC_SHA256) -> bool:
    return hmac.compare_digest(hash_secret(secret, salt, n), expected)


def new_session_token() -> str:
    return secrets.token_urlsafe(32)


def token_digest(token: str) -> str:
    """Session tokens are 256 random bits: a plain SHA-256 is enough to keep them unusable at rest."""
    return hashlib.sha256(token.encode()).hexdigest()
