"""Cluster observability: GET /cluster/stats (JSON) and GET /metrics (Prometheus text format).

Both read one snapshot of the head (`ServerConfig.cluster_head`, set by `comfy-cluster serve
--executors N`): executors with their pid, device, memory use, cached models, queue and what they run
(`inflight`: ModelFn, request id (a prompt's id), attempt and seconds since dispatch); per-tenant vTime
and queued/running invocations; scheduler decisions per second; per-model demand and warm
replicas; invocations parked for a busy executor holding their weights (warm wait) and how often
that paid off; and the cascade figures when cluster.cascade provides `cascade_stats()`. Without a
cluster (in-process serving) the same shape comes back empty with "enabled": false, plus the
in-process runtime's batching counters.
"""

from __future__ import annotations

import importlib
import json
import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

if TYPE_CHECKING:
    from .app import PromptServer

EMPTY = {
    "enabled": False,
    "executors": [],
    "tenants": {},
    "models": {},
    "queued": 0,
    "running": 0,
    "decisions_total": 0,
    "decisions_per_s": 0.0,
}


def _cascade_stats() -> Any:
    try:
        module = importlib.import_module("cluster.cascade")
    except ImportError:
        return None
    fn = getattr(module, "cascade_stats", None)
    if not callable(fn):
        return None
    from nodes.workspace import active

    return fn(active().root)  # the workspace's cascades/*.yaml, re-read: edits take effect


def snapshot(server: PromptServer) -> dict[str, Any]:
    head = getattr(server.config, "cluster_head", None)
    if head is not None:
        stats = {**head.stats(), "enabled": True}
    else:  # in-process serving: the local runtime's batching counters
        from cluster.local import default_local_runtime

        stats = {**EMPTY, **default_local_runtime().stats()}
    cascades = _cascade_stats()
    if cascades is not None:
        stats["cascades"] = cascades
    return stats


def _numeric_leaves(value: Any, path: str = "") -> Iterator[tuple[str, float]]:
    if isinstance(value, bool):
        yield path, float(value)
    elif isinstance(value, (int, float)) and math.isfinite(value):
        yield path, float(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _numeric_leaves(v, f"{path}.{k}" if path else str(k))


class ClusterCollector:
    """Prometheus collector over the same snapshot (one snapshot per scrape)."""

    def __init__(self, server: PromptServer) -> None:
        self.server = server

    def collect(self) -> Iterator[Any]:
        s = snapshot(self.server)
        ex_labels = ["executor", "device"]

        def per_executor(name: str, doc: str, field: str) -> GaugeMetricFamily:
            g = GaugeMetricFamily(name, doc, labels=ex_labels)
            for e in s["executors"]:
                g.add_metric([e["id"], e["device"]], float(field(e) if callable(field) else e[field]))
            return g

        yield GaugeMetricFamily(
            "comfy_cluster_enabled", "1 when a cluster head serves ModelFns", value=float(s["enabled"])
        )
        yield GaugeMetricFamily("comfy_cluster_executors", "registered executors", value=len(s["executors"]))
        yield per_executor(
            "comfy_cluster_executor_memory_used_bytes", "memory in use (arena, weights, activations)", "memory_used"
        )
        yield per_executor("comfy_cluster_executor_memory_budget_bytes", "memory budget", "memory_budget")
        yield per_executor("comfy_cluster_executor_queue", "invocations on the executor", "queue")
        yield per_executor(
            "comfy_cluster_executor_cached_models", "models with weights resident", lambda e: len(e["cached_models"])
        )
        done = CounterMetricFamily("comfy_cluster_executor_completed", "invocations completed", labels=ex_labels)
        for e in s["executors"]:
            done.add_metric([e["id"], e["device"]], float(e["completed"]))
        yield done
        for field, doc in (
            ("vtime", "cumulative vTime (service / weight), seconds"),
            ("queued", "ready invocations waiting"),
            ("running", "invocations running"),
        ):
            g = GaugeMetricFamily(f"comfy_cluster_tenant_{field}", f"per tenant: {doc}", labels=["tenant"])
            for name, t in s["tenants"].items():
                g.add_metric([name], float(t[field]))
            yield g
        yield GaugeMetricFamily("comfy_cluster_queued_invocations", "ready invocations waiting", value=s["queued"])
        yield GaugeMetricFamily("comfy_cluster_running_invocations", "invocations running", value=s["running"])
        yield GaugeMetricFamily(
            "comfy_cluster_parked_invocations",
            "invocations waiting for a busy executor holding their weights (warm wait)",
            value=s.get("parked", 0),
        )
        yield CounterMetricFamily(
            "comfy_cluster_scheduler_decisions", "scheduling decisions", value=s["decisions_total"]
        )
        yield GaugeMetricFamily(
            "comfy_cluster_scheduler_decisions_per_second",
            "decisions per second (last 10 s)",
            value=s["decisions_per_s"],
        )
        for field, doc in (
            ("demand", "executors' worth of recent work"),
            ("target", "warm replicas wanted"),
            ("replicas", "executors holding the weights"),
        ):
            g = GaugeMetricFamily(f"comfy_cluster_model_{field}", f"per model: {doc}", labels=["model"])
            for key, row in s["models"].items():
                g.add_metric([key], float(row[field]))
            yield g
        events = CounterMetricFamily("comfy_cluster_events", "head events", labels=["event"])
        for name in (
            "completed",
            "failed",
            "reruns",
            "executors_lost",
            "bad_messages",
            "deadline_exceeded",
            "lost_inputs",
            "batches_dispatched",
            "parts_batched",
            "batch_fallbacks",
            "warm_waits",
            "warm_wait_hits",
        ):
            events.add_metric([name], float(s.get(name, 0)))
        yield events
        if "cascades" in s:
            g = GaugeMetricFamily("comfy_cluster_cascade", "cascade figures", labels=["stat"])
            for path, value in _numeric_leaves(s["cascades"]):
                g.add_metric([path], value)
            yield g
        # A hosted server adds its per-tenant accounting (comfy_bridge.tenancy.accounting).
        tenant_families = getattr(self.server, "metric_families", None)
        if callable(tenant_families):
            yield from tenant_families()


def add_routes(routes: web.RouteTableDef, server: PromptServer) -> None:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ClusterCollector(server))

    @routes.get("/cluster/stats")
    async def cluster_stats(request: web.Request) -> web.Response:
        return web.json_response(snapshot(server), dumps=lambda o: json.dumps(o, default=str))

    @routes.get("/metrics")
    async def metrics(request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(registry), headers={"Content-Type": CONTENT_TYPE_LATEST})
