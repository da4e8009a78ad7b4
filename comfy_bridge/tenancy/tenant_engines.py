"""One engine per tenant: each tenant's prompts run on its own PromptExecutor, so the output cache
never answers one tenant with another's results (or file names)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from . import tenant_context as context

MAX_ENGINES = 16


class TenantExecutors:
    """The worker's executor: routes each prompt to the engine of the current tenant (least
    recently used engines beyond `max_engines` are dropped, with their caches)."""

    def __init__(
        self, factory: Callable[[], Any], on_tenant: Callable[[str], None] | None = None, max_engines: int = MAX_ENGINES
    ):
        self._factory = factory
        self._on_tenant = on_tenant
        self._max = max_engines
        self._engines: OrderedDict[str, Any] = OrderedDict()
        self.last: Any = None

    def engine(self, tenant: str) -> Any:
        engine = self._engines.pop(tenant, None) or self._factory()
        self._engines[tenant] = engine
        while len(self._engines) > self._max:
            self._engines.popitem(last=False)
        return engine

    async def execute_async(self, prompt: dict, prompt_id: str, extra_data: dict, outputs: list) -> None:
        tenant = context.current() or ""
        if self._on_tenant is not None:
            self._on_tenant(tenant)
        self.last = self.engine(tenant)
        await self.last.execute_async(prompt, prompt_id, extra_data, outputs)

    @property
    def history_result(self) -> dict:
        return getattr(self.last, "history_result", {}) or {}

    @property
    def success(self) -> bool:
        return bool(getattr(self.last, "success", False))

    @property
    def status_messages(self) -> list:
        return list(getattr(self.last, "status_messages", []))

    def reset(self) -> None:
        for engine in self._engines.values():
            engine.reset()

    def unload_models(self) -> None:
        for engine in self._engines.values():
            unload = getattr(engine, "unload_models", None)
            if callable(unload):
                unload()
