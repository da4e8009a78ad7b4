"""A caller's polls of /queue and /history are answered at most every READ_INTERVAL_S each: a faster
read waits its turn (never refused), per caller and route, so a client polling in a tight loop cannot
keep the server busy sending the same answer."""

from __future__ import annotations

from comfy_bridge.tenancy.read_pacing import READ_INTERVAL_S, ReadPacer, paced_route


def test_reads_of_one_key_are_spaced_and_other_keys_wait_for_nothing():
    now = [100.0]
    pacer = ReadPacer(0.1, clock=lambda: now[0])
    # five reads at once: answered 0.1 s apart, in order
    assert [round(pacer.delay(("alice", "/queue")), 9) for _ in range(5)] == [0.0, 0.1, 0.2, 0.3, 0.4]
    assert pacer.delay(("alice", "/history")) == 0.0 and pacer.delay(("bob", "/queue")) == 0.0
    now[0] += 0.45  # its turns are still taken until 100.5
    assert round(pacer.delay(("alice", "/queue")), 9) == 0.05
    now[0] += 10  # a client reading slower than the pace never waits
    assert pacer.delay(("alice", "/queue")) == 0.0
    now[0] += 0.2
    assert pacer.delay(("alice", "/queue")) == 0.0


def test_only_the_polled_reads_are_paced():
    assert READ_INTERVAL_S == 0.1
    assert paced_route("GET", "/queue") == paced_route("GET", "/api/queue") == "/queue"
    assert paced_route("GET", "/history") == paced_route("GET", "/api/history") == "/history"
    for method, path in (
        ("POST", "/queue"),
        ("POST", "/history"),
        ("GET", "/history/abc"),
        ("GET", "/prompt"),
        ("GET", "/api/jobs"),
        ("GET", "/apiqueue"),
    ):
        assert paced_route(method, path) is None, path


async def test_the_hosted_server_paces_each_caller(hosted, monkeypatch):
    alice, bob = hosted.add("alice"), hosted.add("bob")
    asked = []
    real = hosted.server.read_pacer.delay
    monkeypatch.setattr(hosted.server.read_pacer, "delay", lambda key: (asked.append(key), real(key))[1])
    for path, headers in (
        ("/queue", alice),
        ("/api/history", alice),
        ("/api/queue", bob),
        ("/history/x", bob),
        ("/prompt", bob),
    ):
        assert (await hosted.client.get(path, headers=headers)).status == 200
    assert asked == [("alice", "/queue"), ("alice", "/history"), ("bob", "/queue")]
