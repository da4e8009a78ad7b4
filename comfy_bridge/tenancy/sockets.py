"""`TenantScoped`: the server's `sockets` and `sockets_metadata`, keyed by (tenant, client id).

Clients choose their own ids, so two tenants may pick the same one, by chance or to squat on the
other's. Each tenant therefore has a namespace of its own: code reads and writes these mappings
by client id as ComfyUI's do (routes, the publish loop, node packs reading feature flags), and the
calling tenant (tenancy.context) picks the namespace. No tenant can see, take or shadow a socket
of another, and a message for a client id reaches only the tenant the message was produced for.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from typing import TypeVar

from . import tenant_context as context

V = TypeVar("V")


class TenantScoped(MutableMapping[str, V]):
    def __init__(self) -> None:
        self._items: dict[tuple[str | None, str], V] = {}

    def __getitem__(self, sid: str) -> V:
        return self._items[(context.current(), sid)]

    def __setitem__(self, sid: str, value: V) -> None:
        self._items[(context.current(), sid)] = value

    def __delitem__(self, sid: str) -> None:
        del self._items[(context.current(), sid)]

    def __iter__(self) -> Iterator[str]:
        tenant = context.current()
        # A snapshot: the loop thread registers sockets while worker threads read feature flags.
        return iter([sid for owner, sid in list(self._items) if owner == tenant])

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def tenants(self) -> set[str | None]:
        """Every tenant that holds an entry (for messages each tenant gets its own copy of)."""
        return {owner for owner, _ in list(self._items)}

    def every_value(self) -> list[V]:
        """The values of all tenants, for shutdown."""
        return list(self._items.values())
