"""The websocket on the real engine: handshake, feature flags, and the messages of a run checked
against ComfyUI's protocol (shared/reference/comfyui-protocol.md §4.2-§4.5, §3.7, §7.12): the sequence
of a fresh run, of a cached run, of an error and of an interrupt, addressing with and without a client
id, progress, previews (type 4 for negotiated clients, type 1 for the others), history entries."""

import asyncio
import json
import struct

from .conftest import receive_json_until, simple_prompt, wait_for, wait_history, wait_slow_node_running
from .server_nodes import StubSlow


def types(messages):
    return [m["type"] if isinstance(m, dict) else f"BINARY{struct.unpack('>I', m[:4])[0]}" for m in messages]


def done(pid):
    return lambda m: m["type"] == "executing" and m["data"]["node"] is None and m["data"].get("prompt_id") == pid


def states(message) -> dict:
    """A progress_state message as {node: (state, value, max)}."""
    assert message["type"] == "progress_state", message
    return {n: (s["state"], s["value"], s["max"]) for n, s in message["data"]["nodes"].items()}


def queue_remaining(message) -> int:
    assert message["type"] == "status", message
    return message["data"]["status"]["exec_info"]["queue_remaining"]


async def connect(client, sid, flags=False):
    ws = await client.ws_connect(f"/ws?clientId={sid}")
    first = await ws.receive_json(timeout=30)
    assert first["type"] == "status" and first["data"]["sid"] == sid
    if flags:
        await ws.send_str(json.dumps({"type": "feature_flags", "data": {"supports_preview_metadata": True}}))
        assert (await ws.receive_json(timeout=30))["type"] == "feature_flags"
    return ws


async def nothing_else_pending(client, ws) -> None:
    """No message for `ws` is still on its way: a broadcast published now (a queue change) must be the very
    next message, since the publish loop is FIFO."""
    assert (await client.post("/queue", json={"clear": True})).status == 200
    nxt = await ws.receive_json(timeout=30)
    assert nxt == {"type": "status", "data": {"status": {"exec_info": {"queue_remaining": 0}}}}, nxt


async def test_status_with_sid_is_first_and_generated_sid_is_hex(client):
    ws = await client.ws_connect("/ws?clientId=abc")
    first = await ws.receive_json(timeout=30)
    assert first == {"type": "status", "data": {"status": {"exec_info": {"queue_remaining": 0}}, "sid": "abc"}}
    ws2 = await client.ws_connect("/api/ws")
    sid = (await ws2.receive_json(timeout=30))["data"]["sid"]
    assert len(sid) == 32 and int(sid, 16) >= 0
    await ws.close()
    await ws2.close()


async def test_feature_flags_reply_only_to_first_message(client):
    ws = await client.ws_connect("/ws?clientId=f1")
    await ws.receive_json(timeout=30)
    await ws.send_str(json.dumps({"type": "feature_flags", "data": {"supports_preview_metadata": True}}))
    reply = await ws.receive_json(timeout=30)
    assert reply == {
        "type": "feature_flags",
        "data": {
            "supports_preview_metadata": True,
            "max_upload_size": 100 * 1024 * 1024,
            "assets": True,
            "supports_model_type_tags": True,
            "node_replacements": True,
        },
    }
    await ws.send_str(json.dumps({"type": "feature_flags", "data": {}}))
    await ws.send_str("not json")
    # Nothing answers a later feature_flags message; one that is no JSON is told so. The socket still
    # works and gets broadcasts.
    error = await ws.receive_json(timeout=30)
    assert error["type"] == "error" and "Invalid JSON" in error["data"]["message"]
    await client.post("/queue", json={"clear": True})
    msg = await ws.receive_json(timeout=30)
    assert msg["type"] == "status"
    await ws.close()


async def test_fresh_then_cached_run_sequence_and_addressing(client):
    """§4.5: the sequence of `StubImage -> StubSave` with nothing cached, then of the same prompt fully
    cached (no `executing` for either node, `executed` re-sent with the cached UI); §4.2: another client
    sees only the `status` broadcasts."""
    ws = await connect(client, "me")
    other = await connect(client, "other")
    r = await client.post("/prompt", json={"prompt": simple_prompt(), "client_id": "me"})
    pid = (await r.json())["prompt_id"]
    mine = await receive_json_until(ws, done(pid))
    assert types(mine) == [
        "status",
        "status",
        "execution_start",
        "execution_cached",
        "progress_state",
        "executing",
        "progress_state",
        "progress_state",
        "executing",
        "executed",
        "progress_state",
        "execution_success",
        "status",
        "executing",
    ]
    assert [queue_remaining(mine[i]) for i in (0, 1, 12)] == [1, 1, 0]
    start, cached = mine[2]["data"], mine[3]["data"]
    assert set(start) == {"prompt_id", "timestamp"} and start["prompt_id"] == pid
    assert isinstance(start["timestamp"], int)
    assert cached["nodes"] == [] and cached["prompt_id"] == pid and isinstance(cached["timestamp"], int)
    assert states(mine[4]) == {"1": ("running", 0, 1)}
    assert mine[5]["data"] == {"node": "1", "display_node": "1", "prompt_id": pid}
    assert states(mine[6]) == {"1": ("finished", 1, 1)}
    assert states(mine[7]) == {"1": ("finished", 1, 1), "2": ("running", 0, 1)}
    assert mine[8]["data"] == {"node": "2", "display_node": "2", "prompt_id": pid}
    ui = {"images": [{"filename": "stub.png", "subfolder": "", "type": "output"}]}
    assert mine[9]["data"] == {"node": "2", "display_node": "2", "output": ui, "prompt_id": pid}
    assert states(mine[10]) == {"1": ("finished", 1, 1), "2": ("finished", 1, 1)}
    assert set(mine[11]["data"]) == {"prompt_id", "timestamp"} and mine[11]["data"]["prompt_id"] == pid
    assert mine[13]["data"] == {"node": None, "prompt_id": pid}
    for m in mine[4:11]:
        assert m["data"]["prompt_id"] == pid

    r = await client.post("/prompt", json={"prompt": simple_prompt(), "client_id": "me"})
    pid2 = (await r.json())["prompt_id"]
    again = await receive_json_until(ws, done(pid2))
    assert types(again) == [
        "status",
        "status",
        "execution_start",
        "execution_cached",
        "executed",
        "progress_state",
        "execution_success",
        "status",
        "executing",
    ]
    assert again[3]["data"]["nodes"] == ["1", "2"]
    assert again[4]["data"] == {"node": "2", "display_node": "2", "output": ui, "prompt_id": pid2}
    assert states(again[5]) == {"2": ("finished", 1, 1)}
    entry = await wait_history(client, pid2)
    assert entry["outputs"] == {"2": ui}  # a cached output node's UI is in the history too (§3.7)

    theirs = await receive_json_until(other, lambda m: m["type"] == "status" and queue_remaining(m) == 0)
    theirs += await receive_json_until(other, lambda m: m["type"] == "status" and queue_remaining(m) == 0)
    assert types(theirs) == ["status"] * 6
    await nothing_else_pending(client, other)
    await ws.close()
    await other.close()


async def test_history_entry_after_success_and_error(client):
    """§3.7 entry shape; §4.3/§4.5 the runtime error: `execution_error` right after `executing` of the
    failing node, no `execution_success`, and the error payload's fields."""
    r = await client.post("/prompt", json={"prompt": simple_prompt(), "client_id": "h"})
    pid = (await r.json())["prompt_id"]
    entry = await wait_history(client, pid)
    assert set(entry) == {"prompt", "outputs", "status", "meta"}
    assert entry["prompt"][1] == pid and entry["prompt"][4] == ["2"]
    assert entry["outputs"] == {"2": {"images": [{"filename": "stub.png", "subfolder": "", "type": "output"}]}}
    assert entry["meta"] == {"2": {"node_id": "2", "display_node": "2", "parent_node": None, "real_node_id": "2"}}
    assert entry["status"]["status_str"] == "success" and entry["status"]["completed"] is True
    assert [m[0] for m in entry["status"]["messages"]] == ["execution_start", "execution_cached", "execution_success"]

    ws = await connect(client, "e")
    bad = simple_prompt(save_class="StubError")
    bad["1"]["inputs"]["width"] = 9  # not the cached image: node 1 runs again
    r = await client.post("/prompt", json={"prompt": bad, "client_id": "e"})
    pid = (await r.json())["prompt_id"]
    got = await receive_json_until(ws, done(pid))
    assert types(got) == [
        "status",
        "status",
        "execution_start",
        "execution_cached",
        "progress_state",
        "executing",
        "progress_state",
        "progress_state",
        "executing",
        "execution_error",
        "status",
        "executing",
    ]
    assert got[8]["data"]["node"] == "2"
    error = got[9]["data"]
    assert {
        k: error[k] for k in ("prompt_id", "node_id", "node_type", "executed", "exception_message", "exception_type")
    } == {
        "prompt_id": pid,
        "node_id": "2",
        "node_type": "StubError",
        "executed": ["1"],
        "exception_message": "boom\n",
        "exception_type": "RuntimeError",
    }
    assert sorted(error["current_outputs"]) == ["1", "2"]
    assert error["current_inputs"]["filename_prefix"] == ["stub"]
    assert error["traceback"] and all(isinstance(line, str) for line in error["traceback"])
    assert isinstance(error["timestamp"], int)
    entry = await wait_history(client, pid)
    assert entry["status"]["status_str"] == "error" and entry["status"]["completed"] is False
    assert [m[0] for m in entry["status"]["messages"]] == ["execution_start", "execution_cached", "execution_error"]
    assert entry["status"]["messages"][-1][1] == error
    assert entry["outputs"] == {}
    await ws.close()


async def test_progress_messages_follow_progress_state(client):
    """§4.3/§7.13: each ProgressBar update sends `progress_state` (the node running at value/max) and then
    `progress {value, max, prompt_id, node}`, between the node's `executing` and its finished state."""
    ws = await connect(client, "p")
    prompt = {
        "1": {"class_type": "StubImage", "inputs": {"width": 4}},
        "2": {"class_type": "StubProgress", "inputs": {"images": ["1", 0], "steps": 3}},
        "3": {"class_type": "StubSave", "inputs": {"images": ["2", 0], "filename_prefix": "prog"}},
    }
    r = await client.post("/prompt", json={"prompt": prompt, "client_id": "p"})
    pid = (await r.json())["prompt_id"]
    got = await receive_json_until(ws, done(pid))
    at = next(i for i, m in enumerate(got) if m["type"] == "executing" and m["data"]["node"] == "2")
    window = got[at + 1 : at + 8]
    assert types(window) == ["progress_state", "progress"] * 3 + ["progress_state"]
    for step in (1, 2, 3):
        state, prog = window[2 * step - 2], window[2 * step - 1]
        assert states(state)["2"] == ("running", step, 3)
        assert prog["data"] == {"value": step, "max": 3, "prompt_id": pid, "node": "2"}
    assert states(window[6])["2"] == ("finished", 3, 3)
    assert "execution_success" in types(got)
    await ws.close()


async def test_without_client_id_only_progress_is_broadcast(client):
    """§4.2: a prompt without client_id sends no execution_start/cached/executing/executed/success at
    all, while `progress` and `progress_state` are broadcast to every socket."""
    watcher = await connect(client, "watcher")
    prompt = {
        "1": {"class_type": "StubImage", "inputs": {"width": 5}},
        "2": {"class_type": "StubProgress", "inputs": {"images": ["1", 0], "steps": 2}},
        "3": {"class_type": "StubSave", "inputs": {"images": ["2", 0], "filename_prefix": "anon"}},
    }
    r = await client.post("/prompt", json={"prompt": prompt, "prompt_id": "anon"})
    assert r.status == 200
    got = await receive_json_until(watcher, lambda m: m["type"] == "status" and queue_remaining(m) == 0)
    assert set(types(got)) == {"status", "progress_state", "progress"}, types(got)
    assert [m["data"]["value"] for m in got if m["type"] == "progress"] == [1, 2]
    assert all(m["data"]["prompt_id"] == "anon" for m in got if m["type"] != "status")
    assert states([m for m in got if m["type"] == "progress_state"][-1]) == {
        "1": ("finished", 1, 1),
        "2": ("finished", 2, 2),
        "3": ("finished", 1, 1),
    }
    assert (await wait_history(client, "anon"))["status"]["status_str"] == "success"
    await nothing_else_pending(client, watcher)
    await watcher.close()


async def test_previews_type4_for_negotiated_clients_type1_for_legacy(client):
    """§4.4: per ProgressBar update with a preview, a negotiated client gets `progress_state, [type 4],
    progress`; a legacy client gets `progress_state, progress, [type 1]`."""
    rich = await connect(client, "rich", flags=True)
    legacy = await connect(client, "legacy")
    for sid, sock in (("rich", rich), ("legacy", legacy)):
        r = await client.post(
            "/prompt", json={"prompt": simple_prompt(prefix=sid, save_class="StubPreview"), "client_id": sid}
        )
        pid = (await r.json())["prompt_id"]
        got = await receive_json_until(sock, done(pid))
        at = next(
            i
            for i, m in enumerate(got)
            if isinstance(m, dict) and m["type"] == "executing" and m["data"]["node"] == "2"
        )
        window = got[at + 1 : at + 5]
        frames = [m for m in got if isinstance(m, bytes)]
        assert len(frames) == 1
        if sid == "rich":
            assert types(window) == ["progress_state", "BINARY4", "progress", "executed"]
            meta_len = struct.unpack(">I", frames[0][4:8])[0]
            meta = json.loads(frames[0][8 : 8 + meta_len])
            assert meta == {
                "node_id": "2",
                "prompt_id": pid,
                "display_node_id": "2",
                "parent_node_id": None,
                "real_node_id": "2",
                "image_type": "image/png",
            }
            assert frames[0][8 + meta_len :].startswith(b"\x89PNG")
        else:
            assert types(window) == ["progress_state", "progress", "BINARY1", "executed"]
            assert struct.unpack(">I", frames[0][4:8])[0] == 2  # PNG
            assert frames[0][8:].startswith(b"\x89PNG")
        assert window[2 if sid == "rich" else 1]["data"] == {"value": 0, "max": 1, "prompt_id": pid, "node": "2"}
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


#####
async def test_reconnect_with_same_id_keeps_the_new_socket(client):
    from comfy_bridge.server import PromptServer

    old = await connect(client, "same")
    old_server_side = PromptServer.instance.sockets["same"]
    new = await connect(client, "same")
    await old.close()
    await wait_for(lambda: old_server_side.closed, "the server closing the old socket")
    r = await client.post("/prompt", json={"prompt": simple_prompt(), "client_id": "same"})
    got = await receive_json_until(new, done((await r.json())["prompt_id"]))
    assert "execution_start" in types(got) and "execution_success" in types(got)
    await new.close()


async def test_interrupt_running_prompt_records_cancel(client):
    """§3.5: an interrupt naming another prompt is a no-op; naming the running one stops it.
    §4.5/§7.12: `execution_interrupted {prompt_id, node_id, node_type, executed}` after the node's
    `executing`, no `execution_success`, history status error with the three status messages."""
    ws = await connect(client, "i")
    r = await client.post("/prompt", json={"prompt": simple_prompt(save_class="StubSlow"), "client_id": "i"})
    pid = (await r.json())["prompt_id"]
    await receive_json_until(ws, lambda m: m["type"] == "executing" and m["data"]["node"] == "2")
    assert (await client.post("/interrupt", json={"prompt_id": "not-running"})).status == 200
    ticks = StubSlow.ticks
    await wait_for(lambda: StubSlow.ticks >= ticks + 3, "the node checking the interrupt flag again")
    r = await client.get("/queue")
    assert [i[1] for i in (await r.json())["queue_running"]] == [pid]
    assert (await client.post("/interrupt", json={"prompt_id": pid})).status == 200
    got = await receive_json_until(ws, done(pid))
    assert types(got) == ["execution_interrupted", "status", "executing"]
    data = got[0]["data"]
    assert {k: v for k, v in data.items() if k != "timestamp"} == {
        "prompt_id": pid,
        "node_id": "2",
        "node_type": "StubSlow",
        "executed": ["1"],
    }
    assert isinstance(data["timestamp"], int)
    entry = await wait_history(client, pid)
    assert entry["status"]["status_str"] == "error" and entry["status"]["completed"] is False
    assert [m[0] for m in entry["status"]["messages"]] == [
        "execution_start",
        "execution_cached",
        "execution_interrupted",
    ]
    r = await client.get(f"/api/jobs/{pid}")
    assert (await r.json())["status"] == "cancelled"
    await ws.close()


async def test_global_interrupt_with_empty_body(client):
    """§3.5 an empty body is a global interrupt; §4.2 without a client id `execution_interrupted` is
    broadcast (and is the only execution_* message anyone gets)."""
    watcher = await connect(client, "watcher")
    r = await client.post("/prompt", json={"prompt": simple_prompt(save_class="StubSlow"), "prompt_id": "g"})
    assert r.status == 200
    await wait_slow_node_running()
    assert (await client.post("/interrupt", data=b"")).status == 200
    entry = await wait_history(client, "g")
    assert entry["status"]["messages"][-1][0] == "execution_interrupted"
    got = await receive_json_until(watcher, lambda m: m["type"] == "execution_interrupted")
    assert [t for t in types(got) if t.startswith("execut")] == ["execution_interrupted"]
    assert got[-1]["data"]["node_id"] == "2" and got[-1]["data"]["prompt_id"] == "g"
    await watcher.close()


async def test_free_memory_drops_the_engine_caches(client):
    """§3.6: `free_memory` recreates the executor's caches: the same prompt, cached before, runs again."""
    from comfy_bridge.server import PromptServer

    async def cached_nodes(pid):
        r = await client.post("/prompt", json={"prompt": simple_prompt(), "prompt_id": pid})
        assert r.status == 200
        messages = dict((await wait_history(client, pid))["status"]["messages"])
        return messages["execution_cached"]["nodes"]

    assert await cached_nodes("first") == []
    assert await cached_nodes("second") == ["1", "2"]
    assert (await client.post("/free", json={"unload_models": True, "free_memory": True})).status == 200
    queue = PromptServer.instance.prompt_queue
    await wait_for(lambda: queue.get_flags(reset=False) == {}, "the worker taking the /free flags")
    assert await cached_nodes("third") == []
