"""/queue, /history and /jobs: pending items, clearing, paging, job shapes."""

from .conftest import simple_prompt, wait_history, wait_slow_node_running


async def _block_worker(client, pid="blocker"):
    """Start a slow prompt and wait until it runs, so later prompts stay pending."""
    await client.post("/prompt", json={"prompt": simple_prompt(save_class="StubSlow"), "prompt_id": pid})
    await wait_slow_node_running()


async def test_queue_shows_running_and_pending_and_post_deletes(client):
    await _block_worker(client)
    for pid in ("a", "b", "c"):
        await client.post("/prompt", json={"prompt": simple_prompt(), "prompt_id": pid})
    q = await (await client.get("/api/queue")).json()
    assert [i[1] for i in q["queue_running"]] == ["blocker"]
    assert sorted(i[1] for i in q["queue_pending"]) == ["a", "b", "c"]
    item = q["queue_pending"][0]
    assert len(item) == 5 and isinstance(item[2], dict) and item[4] == ["2"]
    assert (await (await client.get("/prompt")).json())["exec_info"]["queue_remaining"] == 4
    assert (await client.post("/queue", json={"delete": ["b", "nope"]})).status == 200
    q = await (await client.get("/queue")).json()
    assert sorted(i[1] for i in q["queue_pending"]) == ["a", "c"]
    assert (await client.post("/queue", json={"clear": True})).status == 200
    assert (await (await client.get("/queue")).json())["queue_pending"] == []
    await client.post("/interrupt", json={})
    await wait_history(client, "blocker")
    assert (await client.get("/history/a")).status == 200 and await (await client.get("/history/a")).json() == {}


async def test_front_runs_before_earlier_items(client):
    await _block_worker(client)
    await client.post("/prompt", json={"prompt": simple_prompt(), "prompt_id": "late"})
    await client.post("/prompt", json={"prompt": simple_prompt(), "prompt_id": "first", "front": True})
    await client.post("/interrupt", json={})
    await wait_history(client, "late")
    order = list(await (await client.get("/history")).json())
    assert order.index("first") < order.index("late")


async def test_history_paging_delete_and_clear(client):
    for i in range(5):
        await client.post("/prompt", json={"prompt": simple_prompt(), "prompt_id": f"p{i}"})
    await wait_history(client, "p4")
    all_ids = list(await (await client.get("/history")).json())
    assert all_ids == ["p0", "p1", "p2", "p3", "p4"]
    assert list(await (await client.get("/history?max_items=2")).json()) == ["p3", "p4"]
    assert list(await (await client.get("/history?max_items=2&offset=1")).json()) == ["p1", "p2"]
    assert await (await client.get("/history?offset=9")).json() == {}
    assert (await client.get("/history?max_items=x")).status == 400
    await client.post("/history", json={"delete": ["p1"]})
    assert "p1" not in await (await client.get("/history")).json()
    await client.post("/api/history", json={"clear": True})
    assert await (await client.get("/history")).json() == {}


async def test_jobs_list_and_detail_shapes(client):
    r = await client.post(
        "/prompt",
        json={
            "prompt": simple_prompt(),
            "prompt_id": "ok",
            "extra_data": {"extra_pnginfo": {"workflow": {"id": "wf1"}}},
        },
    )
    await wait_history(client, "ok")
    await client.post("/prompt", json={"prompt": simple_prompt(save_class="StubError"), "prompt_id": "err"})
    await wait_history(client, "err")
    r = await client.get("/api/jobs?status=completed,failed,cancelled&limit=64&offset=0")
    body = await r.json()
    assert body["pagination"] == {"offset": 0, "limit": 64, "total": 2, "has_more": False}
    jobs = {j["id"]: j for j in body["jobs"]}
    ok = jobs["ok"]
    assert ok["status"] == "completed" and ok["workflow_id"] == "wf1"
    assert ok["outputs_count"] == 1 and ok["previewable_outputs_count"] == 1
    assert ok["preview_output"] == {
        "filename": "stub.png",
        "subfolder": "",
        "type": "output",
        "nodeId": "2",
        "mediaType": "images",
    }
    assert isinstance(ok["create_time"], int) and ok["execution_end_time"] >= ok["execution_start_time"]
    assert jobs["err"]["status"] == "failed" and jobs["err"]["execution_error"]["exception_type"] == "RuntimeError"
    r = await client.get("/api/jobs?status=in_progress,pending&limit=200&offset=0")
    assert (await r.json())["jobs"] == []
    r = await client.get("/api/jobs?limit=1")
    page = await r.json()
    assert len(page["jobs"]) == 1 and page["pagination"]["has_more"] is True
    assert page["jobs"][0]["id"] == "err"  # newest first
    detail = await (await client.get("/api/jobs/ok")).json()
    assert detail["outputs"]["2"]["images"][0]["filename"] == "stub.png"
    assert detail["workflow"]["extra_data"]["extra_pnginfo"]["workflow"]["id"] == "wf1"
    assert (await client.get("/api/jobs/unknown")).status == 404
    assert (await client.get("/api/jobs?status=bogus")).status == 400
    assert (await client.get("/api/jobs?limit=0")).status == 400


async def test_jobs_cancel_pending_and_running(client):
    await _block_worker(client, "run1")
    await client.post("/prompt", json={"prompt": simple_prompt(), "prompt_id": "pend1"})
    pending = await (await client.get("/api/jobs?status=in_progress,pending")).json()
    assert {j["id"]: j["status"] for j in pending["jobs"]} == {"run1": "in_progress", "pend1": "pending"}
    r = await client.post("/api/jobs/pend1/cancel")
    assert await r.json() == {"cancelled": True}
    r = await client.post("/api/jobs/cancel", json={"job_ids": ["run1", "unknown"]})
    assert await r.json() == {"cancelled": True}
    await wait_history(client, "run1")
    assert await (await client.post("/api/jobs/run1/cancel")).json() == {"cancelled": False}
    assert (await client.post("/api/jobs/cancel", json={"job_ids": "x"})).status == 400
