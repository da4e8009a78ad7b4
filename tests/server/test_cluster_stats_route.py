"""GET /cluster/stats and GET /metrics: the head's executors, tenants, scheduler and model figures,
as JSON and in the Prometheus text format, and an empty cluster section when serving in-process."""

from __future__ import annotations

import time

import pytest
import zmq
from prometheus_client.parser import text_string_to_metric_families

from cluster import messages as m
from cluster.call import NoParams, pack
from cluster.control.head import Head


@pytest.fixture
def head():
    head = Head(heartbeat_s=0.2, lost_after_s=30.0).start()
    # a registered executor (a socket speaking the protocol) and one queued invocation
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.IDENTITY, b"fake-ex")
    sock.connect(head.address)
    sock.send(m.encode(m.Register("fake-ex", "host", 4242, "cuda:3", 1, 1 << 30, 123456, ["model-a"], "cc-fake-ex-")))
    end = time.monotonic() + 10
    while "fake-ex" not in head.executors and time.monotonic() < end:
        time.sleep(0.01)
    head.executors["fake-ex"].draining = True  # it never answers: keep the invocation queued
    head.submit(
        tenant="alice", request="r1", fn="f", model_key="model-a", call=pack("f", None, NoParams()), inputs={}, nulls=[]
    )
    while head.stats()["queued"] < 1 and time.monotonic() < end:
        time.sleep(0.01)
    yield head
    sock.close(linger=0)
    head.stop()


async def test_stats_route_reports_executors_tenants_and_scheduler(make_client, head):
    client = await make_client(cluster_head=head)
    resp = await client.get("/cluster/stats")
    assert resp.status == 200
    body = await resp.json()
    assert body["enabled"] is True
    [ex] = body["executors"]
    assert (ex["id"], ex["device"], ex["memory_used"], ex["memory_budget"], ex["cached_models"], ex["queue"]) == (
        "fake-ex",
        "cuda:3",
        123456,
        1 << 30,
        ["model-a"],
        0,
    )
    assert body["tenants"]["alice"]["queued"] == 1 and body["tenants"]["alice"]["running"] == 0
    assert isinstance(body["tenants"]["alice"]["vtime"], float)
    assert body["queued"] == 1 and body["decisions_per_s"] == 0.0
    assert body["models"]["model-a"]["replicas"] == 1
    assert (await client.get("/api/cluster/stats")).status == 200


async def test_metrics_route_exposes_the_same_figures(make_client, head):
    client = await make_client(cluster_head=head)
    resp = await client.get("/metrics")
    assert resp.status == 200 and resp.headers["Content-Type"].startswith("text/plain")
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(await resp.text())
        for s in fam.samples
    }
    ex = (("device", "cuda:3"), ("executor", "fake-ex"))
    assert samples[("comfy_cluster_executors", ())] == 1
    assert samples[("comfy_cluster_executor_memory_used_bytes", ex)] == 123456
    assert samples[("comfy_cluster_executor_cached_models", ex)] == 1
    assert samples[("comfy_cluster_tenant_queued", (("tenant", "alice"),))] == 1
    assert samples[("comfy_cluster_queued_invocations", ())] == 1
    assert samples[("comfy_cluster_scheduler_decisions_total", ())] == 0
    assert samples[("comfy_cluster_model_replicas", (("model", "model-a"),))] == 1
    head.counters["batches_dispatched"] += 3  # what the head counts when it runs steps batched
    text = await (await client.get("/metrics")).text()
    assert 'comfy_cluster_events_total{event="batches_dispatched"} 3.0' in text
    head.counters["warm_waits"] += 2  # invocations parked for a busy executor holding their weights
    text = await (await client.get("/metrics")).text()
    assert 'comfy_cluster_events_total{event="warm_waits"} 2.0' in text
    assert "comfy_cluster_parked_invocations 0.0" in text


async def test_without_a_cluster_the_routes_answer_empty(make_client):
    client = await make_client()
    body = await (await client.get("/cluster/stats")).json()
    assert body["enabled"] is False and body["executors"] == [] and body["tenants"] == {}
    text = await (await client.get("/metrics")).text()
    assert "comfy_cluster_enabled 0.0" in text and "comfy_cluster_executors 0.0" in text
