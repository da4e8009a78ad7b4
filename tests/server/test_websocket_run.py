"""The websocket: handshake, feature flags, the message sequence of a run, addressing, previews."""
import asyncio
import json
import struct

from .conftest import receive_json_until, simple_prompt, wait_history, wait_node_running


def types(messages):
    return [m["type"] if isinstance(m, dict) else "BINARY" for m in messages]


async def test_status_with_sid_is_first_and_generated_sid_is_hex(client):
    ws = await client.ws_connect("/ws?clientId=abc")
    first = await ws.receive_json(timeout=5)
    assert first == {"type": "status", "data": {"status": {"exec_info": {"queue_remaining": 0}}, "sid": "abc"}}
    ws2 = await client.ws_connect("/api/ws")
    sid = (await ws2.receive_json(timeout=5))["data"]["sid"]
    assert len(sid) == 32 and int(sid, 16) >= 0
    await ws.close()
    await ws2.close()


async def test_feature_flags_reply_only_to_first_message(client):
    ws = await client.ws_connect("/ws?clientId=f1")
    await ws.receive_json(timeout=5)
    await ws.send_str(json.dumps({"type": "feature_flags", "data": {"supports_preview_metadata": True}}))
    reply = await ws.receive_json(timeout=5)
    assert reply == {"type": "feature_flags",
                     "data": {"supports_preview_metadata": True, "max_upload_size": 100 * 1024 * 1024}}
    await ws.send_str(json.dumps({"type": "feature_flags", "data": {}}))
    await ws.send_str("not json")
    # Nothing answers the later messages; the socket still works and gets broadcasts.
    await client.post("/queue", json={"clear": True})
    msg = await ws.receive_json(timeout=5)
    assert msg["type"] == "status"
    await ws.close()


async def test_run_sequence_and_addressing(client):
    ws = await client.ws_connect("/ws?clientId=me")
    other = await client.ws_connect("/ws?clientId=other")
    await ws.receive_json(timeout=5)
    await other.receive_json(timeout=5)
    r = await client.post("/prompt", json={"prompt": simple_prompt(), "client_id": "me"})
    pid = (await r.json())["prompt_id"]
    mine = await receive_json_until(ws, lambda m: m["type"] == "executing" and m["data"]["node"] is None)
    assert types(mine) == ["status", "status", "execution_start", "execution_cached", "executing", "executing",
                           "executed", "execution_success", "status", "executing"]
    assert mine[0]["data"]["status"]["exec_info"]["queue_remaining"] == 1
    assert mine[-2]["data"]["status"]["exec_info"]["queue_remaining"] == 0
    assert mine[-1]["data"] == {"node": None, "prompt_id": pid}
    assert mine[6]["data"]["output"]["images"][0]["filename"] == "fake.png"
    # The other client sees only the queue broadcasts.
    theirs = await receive_json_until(other, lambda m: m["data"]["status"]["exec_info"]["queue_remaining"] == 0)
    assert types(theirs) == ["status", "status", "status"]
    try:
        extra = await other.receive(timeout=0.2)
    except asyncio.TimeoutError:
        extra = None
    assert extra is None, extra
    await ws.close()
    await other.close()


async def test_history_entry_after_success_and_error(client):
    r = await client.post("/prompt", json={"prompt": simple_prompt(), "client_id": "h"})
    pid = (await r.json())["prompt_id"]
    entry = await wait_history(client, pid)
    assert set(entry) == {"prompt", "outputs", "status", "meta"}
    assert entry["prompt"][1] == pid and entry["prompt"][4] == ["2"]
    assert entry["outputs"] == {"2": {"images": [{"filename": "fake.png", "subfolder": "", "type": "output"}]}}
    assert entry["status"]["status_str"] == "success" and entry["status"]["completed"] is True
    assert [m[0] for m in entry["status"]["messages"]] == ["execution_start", "execution_cached",
                                                           "execution_success"]
    r = await client.post("/prompt", json={"prompt": simple_prompt(save_class="FakeError")})
    entry = await wait_history(client, (await r.json())["prompt_id"])
    assert entry["status"]["status_str"] == "error" and entry["status"]["completed"] is False
    assert entry["status"]["messages"][-1][0] == "execution_error"


async def test_previews_type4_for_negotiated_clients_type1_for_legacy(client):
    rich = await client.ws_connect("/ws?clientId=rich")
    await rich.receive_json(timeout=5)
    await rich.send_str(json.dumps({"type": "feature_flags", "data": {"supports_preview_metadata": True}}))
    await rich.receive_json(timeout=5)
    legacy = await client.ws_connect("/ws?clientId=legacy")
    await legacy.receive_json(timeout=5)
    for sid, sock in (("rich", rich), ("legacy", legacy)):
        await client.post("/prompt", json={"prompt": simple_prompt(save_class="FakePreview"), "client_id": sid})
        got = await receive_json_until(sock, lambda m: m["type"] == "executing" and m["data"]["node"] is None)
        frames = [m for m in got if isinstance(m, bytes)]
        assert len(frames) == 1
        event = struct.unpack(">I", frames[0][:4])[0]
        if sid == "rich":
            assert event == 4
            meta_len = struct.unpack(">I", frames[0][4:8])[0]
            meta = json.loads(frames[0][8:8 + meta_len])
            assert meta["image_type"] == "image/png" and meta["node_id"] == "2"
            assert frames[0][8 + meta_len:].startswith(b"\x89PNG")
        else:
            assert event == 1
            assert struct.unpack(">I", frames[0][4:8])[0] == 2  # PNG
            assert frames[0][8:].startswith(b"\x89PNG")
    await rich.close()
    await legacy.close()


async def test_send_sync_works_from_other_threads(client):
    from comfy_bridge.server import PromptServer
    ws = await client.ws_connect("/ws?clientId=t")
    await ws.receive_json(timeout=5)
    server = PromptServer.instance
    await asyncio.get_running_loop().run_in_executor(None, server.send_sync, "my-event", {"x": 1}, "t")
    await asyncio.get_running_loop().run_in_executor(None, server.send_sync, 3, b"raw", None)
    assert await ws.receive_json(timeout=5) == {"type": "my-event", "data": {"x": 1}}
    assert (await ws.receive_bytes(timeout=5)) == struct.pack(">I", 3) + b"raw"
    server.send_progress_text("hello", "7", "t")
    frame = await ws.receive_bytes(timeout=5)
    assert frame == struct.pack(">I", 3) + struct.pack(">I", 1) + b"7" + b"hello"
    await ws.close()


async def test_reconnect_with_same_id_keeps_the_new_socket(client):
    old = await client.ws_connect("/ws?clientId=same")
    await old.receive_json(timeout=5)
    new = await client.ws_connect("/ws?clientId=same")
    await new.receive_json(timeout=5)
    await old.close()
    await asyncio.sleep(0.05)
    await client.post("/prompt", json={"prompt": simple_prompt(), "client_id": "same"})
    got = await receive_json_until(new, lambda m: m["type"] == "execution_success")
    assert "execution_start" in types(got)
    await new.close()


async def test_interrupt_running_prompt_records_cancel(client):
    ws = await client.ws_connect("/ws?clientId=i")
    await ws.receive_json(timeout=5)
    r = await client.post("/prompt", json={"prompt": simple_prompt(save_class="FakeSlow"), "client_id": "i"})
    pid = (await r.json())["prompt_id"]
    await receive_json_until(ws, lambda m: m["type"] == "executing" and m["data"]["node"] == "2")
    assert (await client.post("/interrupt", json={"prompt_id": "not-running"})).status == 200
    await asyncio.sleep(0.1)
    r = await client.get("/queue")
    assert [i[1] for i in (await r.json())["queue_running"]] == [pid]
    assert (await client.post("/interrupt", json={"prompt_id": pid})).status == 200
    got = await receive_json_until(ws, lambda m: m["type"] == "executing" and m["data"]["node"] is None)
    assert "execution_interrupted" in types(got)
    entry = await wait_history(client, pid)
    assert entry["status"]["status_str"] == "error"
    r = await client.get(f"/api/jobs/{pid}")
    assert (await r.json())["status"] == "cancelled"
    await ws.close()


async def test_global_interrupt_with_empty_body(client):
    r = await client.post("/prompt", json={"prompt": simple_prompt(save_class="FakeSlow"), "prompt_id": "g"})
    assert r.status == 200
    await wait_node_running("2")
    assert (await client.post("/interrupt", data=b"")).status == 200
    entry = await wait_history(client, "g")
    assert entry["status"]["messages"][-1][0] == "execution_interrupted"


async def test_free_memory_resets_executor(client):
    from .conftest import FakeExecutor
    r = await client.post("/prompt", json={"prompt": simple_prompt()})
    await wait_history(client, (await r.json())["prompt_id"])
    assert (await client.post("/free", json={"unload_models": True, "free_memory": True})).status == 200
    for _ in range(300):
        if FakeExecutor.instances[0].resets:
            break
        await asyncio.sleep(0.01)
    assert FakeExecutor.instances[0].resets == 1
