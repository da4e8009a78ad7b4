"""Per-tenant accounting of a hosted server: GPU time, prompts, images produced and bytes stored,
for GET /cluster/tenants/{name}/usage and the Prometheus /metrics families.

GPU time comes from the cluster scheduler when a cluster head serves the ModelFns: its vTime is
the measured execution time of the tenant's invocations divided by the tenant's weight (so
`gpu_seconds` = vTime x weight), kept by the head in memory. Without a cluster it is the wall
time the server spent running the tenant's prompts, which the store keeps across restarts
(`server_seconds`, reported in both cases).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from .quotas import Quotas
from .store import Store, Tenant

log = logging.getLogger(__name__)


def cluster_tenants(head: Any) -> dict[str, dict] | None:
    """The head's per-tenant scheduler figures, or None without a cluster."""
    if head is None:
        return None
    try:
        return dict(head.stats().get("tenants") or {})
    except Exception:  # accounting must never take a route down with it
        log.exception("cluster head stats failed")
        return None


class Accounting:
    def __init__(self, store: Store, quotas: Quotas, head: Callable[[], Any]):
        self.store = store
        self.quotas = quotas
        self._head = head

    def usage(self, tenant: Tenant) -> dict[str, Any]:
        return self._row(tenant, cluster_tenants(self._head()), fresh=True)

    def all_usage(self, fresh: bool = True) -> list[dict[str, Any]]:
        scheduler = cluster_tenants(self._head())  # one head snapshot for every tenant
        return [self._row(t, scheduler, fresh) for t in self.store.list_tenants()]

    def _row(self, tenant: Tenant, scheduler: dict[str, dict] | None, fresh: bool) -> dict[str, Any]:
        recorded = self.store.usage(tenant.name)
        pending, running = self.store.queue_counts(tenant.name)
        weight = tenant.weight if tenant.weight > 0 else 1.0
        if scheduler is not None:
            figures = scheduler.get(tenant.name) or {}
            vtime = float(figures.get("vtime", 0.0))
            gpu_seconds, source = vtime * float(figures.get("weight", weight)), "cluster"
        else:
            gpu_seconds, source = float(recorded["seconds"]), "server"
            vtime = gpu_seconds / weight
        return {
            "tenant": tenant.name,
            "gpu_seconds": gpu_seconds,
            "vtime": vtime,
            "gpu_time_source": source,
            "server_seconds": float(recorded["seconds"]),
            "prompts": recorded["prompts"],
            "images": recorded["images"],
            "stored_bytes": self.quotas.stored_bytes(tenant.name, fresh),
            "pending": pending,
            "running": running,
            "limits": tenant.as_dict(),
        }

    def metric_families(self) -> Iterator[Any]:
        """Prometheus families, one sample per tenant (collected once per scrape)."""
        rows = self.all_usage(fresh=False)  # stored bytes measured at most every few seconds
        gpu = GaugeMetricFamily(
            "comfy_cluster_tenant_gpu_seconds",
            "per tenant: GPU seconds (cluster scheduler's measured vTime x weight, else server-measured prompt time)",
            labels=["tenant", "source"],
        )
        families = [gpu]
        for field, doc in (
            ("server_seconds", "seconds the server spent running the tenant's prompts"),
            ("prompts", "prompts finished"),
            ("images", "images produced"),
        ):
            family = CounterMetricFamily(f"comfy_cluster_tenant_{field}", f"per tenant: {doc}", labels=["tenant"])
            families.append(family)
            for row in rows:
                family.add_metric([row["tenant"]], float(row[field]))
        gauges = {}
        for field, doc in (
            ("stored_bytes", "bytes stored in the tenant's folders"),
            ("pending", "prompts queued"),
            ("running", "prompts running"),
        ):
            name = (
                "comfy_cluster_tenant_stored_bytes"
                if field == "stored_bytes"
                else f"comfy_cluster_tenant_prompts_{field}"
            )
            gauges[field] = GaugeMetricFamily(name, f"per tenant: {doc}", labels=["tenant"])
        for row in rows:
            gpu.add_metric([row["tenant"], row["gpu_time_source"]], row["gpu_seconds"])
            for field, family in gauges.items():
                family.add_metric([row["tenant"]], float(row[field]))
        yield from families
        yield from gauges.values()
