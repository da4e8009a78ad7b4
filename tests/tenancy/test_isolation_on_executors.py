"""Tenant isolation with an executor and the shared-memory data plane in the path: a hosted server on a
one-executor local cluster, where each tenant's prompt sends its uploaded image through shared memory to
a pack node that runs whole on the executor process and saves there into the tenant's folder. Both ways
round, the routes whose data comes from running prompts (history, view, queue, jobs, websocket
messages) give each tenant its own and nothing of the other's; waits are for events, not sleeps."""

from __future__ import annotations

import asyncio
import json
import textwrap

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer
from isolation_cases import Tenant, _form, _png, clean

from comfy_bridge.server import ServerConfig, create_app
from comfy_bridge.server.app import SERVER_KEY
from nodes.workspace import Workspace

PACK = textwrap.dedent("""
    import os
    from comfy_bridge.compat import folder_paths

    class TenantInvertSave:
        @classmethod
        def INPUT_TYPES(cls):
            return {"required": {"image": ("IMAGE",), "prefix": ("STRING", {"default": "x"})}}
        RETURN_TYPES = ("STRING",)
        OUTPUT_NODE = True
        FUNCTION = "run"
        CATEGORY = "test"

        def run(self, image, prefix):
            from PIL import Image
            array = ((1.0 - image[0]).clamp(0, 1) * 255).byte().numpy()
            name = f"{prefix}_{os.getpid()}.png"
            Image.fromarray(array).save(os.path.join(folder_paths.get_output_directory(), name))
            return {"ui": {"images": [{"filename": name, "subfolder": "", "type": "output"}]}, "result": (name,)}

    NODE_CLASS_MAPPINGS = {"TenantInvertSave": TenantInvertSave}
""")


@pytest.fixture(scope="module")
def cluster():
    from cluster.executor.local_cluster import start_local_cluster

    head, runtime = start_local_cluster(1, threads_per_executor=1)
    yield head, runtime
    head.stop()


@pytest.fixture
async def client(tmp_path, cluster):
    from comfy_bridge.execution import PromptExecutor
    from comfy_bridge.registry import build_registry

    head, runtime = cluster
    ws = Workspace(tmp_path / "ws").create()
    packs = tmp_path / "packs"
    packs.mkdir()
    (packs / "tenant_pack.py").write_text(PACK)
    (tmp_path / "web").mkdir()
    config = ServerConfig(
        workspace=ws,
        state_db=tmp_path / "state.sqlite3",
        front_end_root=tmp_path / "web",
        cluster_head=head,
        scheduler=head,
    )
    registry = build_registry(ws, extra_custom_node_dirs=(packs,))

    def make_executor(server):
        return PromptExecutor(server.registry, server, runtime=runtime)

    app = create_app(config, registry=registry, executor_factory=make_executor)
    async with TestClient(TestServer(app)) as c:
        yield c


async def _read_until(sock, prompt_id: str) -> list:
    got = []
    async with asyncio.timeout(120):
        while True:
            msg = await sock.receive()
            assert msg.type in (aiohttp.WSMsgType.TEXT, aiohttp.WSMsgType.BINARY), msg
            got.append(json.loads(msg.data) if msg.type == aiohttp.WSMsgType.TEXT else msg.data)
            m = got[-1]
            if (
                isinstance(m, dict)
                and m["type"] in ("execution_success", "execution_error")
                and m["data"].get("prompt_id") == prompt_id
            ):
                return got


async def _history_entry(client, t) -> dict:
    """The prompt's history entry: the worker records it just after execution_success goes out."""
    async with asyncio.timeout(60):
        while True:
            history = await (await client.get(f"/history/{t.done}", headers=t.headers)).json()
            if t.done in history:
                return history[t.done]
            await asyncio.sleep(0.02)


async def test_prompt_data_stays_with_its_tenant_through_an_executor(client, cluster):
    head, _ = cluster
    server = client.server.app[SERVER_KEY]
    tenants = []
    for name in ("alice", "bob"):
        server.store.add_tenant(name)
        tenants.append(Tenant(name, {"Authorization": f"Bearer {server.store.create_key(name)}"}))
    server.gate._active = (0.0, False)
    socks = {}
    for t in tenants:
        form = _form(f"{t.name}input.png", _png(f"{t.upper}-PNGTEXT"))
        assert (await client.post("/upload/image", data=form, headers=t.headers)).status == 200
        # Both take the same client id: each in its own namespace.
        socks[t.name] = await client.ws_connect("/ws?clientId=same", headers=t.headers)
    decisions = head.stats()["decisions_total"]
    for t in tenants:
        prompt = {
            "1": {"class_type": "LoadImage", "inputs": {"image": f"{t.name}input.png"}},
            "2": {"class_type": "TenantInvertSave", "inputs": {"image": ["1", 0], "prefix": f"{t.name}img"}},
        }
        resp = await client.post("/prompt", json={"prompt": prompt, "client_id": "same"}, headers=t.headers)
        assert resp.status == 200, await resp.text()
        t.done = (await resp.json())["prompt_id"]
    messages = {t.name: await _read_until(socks[t.name], t.done) for t in tenants}
    assert head.stats()["decisions_total"] >= decisions + 2  # both ran on the executor
    for t in tenants:
        entry = await _history_entry(client, t)
        assert entry["status"]["status_str"] == "success", entry["status"]
        t.image = entry["outputs"]["2"]["images"][0]["filename"]
        assert int(t.image.rsplit("_", 1)[1][:-4]) in head.local_cluster.pids()  # written by the executor
        assert (server.workspace.output_dir / "tenants" / t.name / t.image).is_file()
    for attacker, victim in ((tenants[1], tenants[0]), (tenants[0], tenants[1])):
        seen = json.dumps([m for m in messages[attacker.name] if isinstance(m, dict)]).encode()
        clean(seen, victim, "", "socket")
        assert attacker.done.encode() in seen and b'"executed"' in seen  # its own messages did arrive
        for path in (
            "/queue",
            "/history",
            f"/history/{victim.done}",
            "/jobs",
            f"/jobs/{victim.done}",
            f"/view?filename={victim.image}",
            f"/view?filename={victim.name}input.png&type=input",
            "/internal/files/output",
            "/prompt",
        ):
            resp = await client.get(path, headers=attacker.headers)
            body = await resp.read()
            assert resp.status in (200, 404), (path, resp.status)
            clean(body, victim, "", path)
        assert (await client.get(f"/view?filename={victim.image}", headers=attacker.headers)).status == 404
        assert (await client.get(f"/view?filename={victim.image}", headers=victim.headers)).status == 200
        history = await (await client.get("/history", headers=attacker.headers)).json()
        assert list(history) == [attacker.done]
    assert not [p for p in server.workspace.output_dir.iterdir() if p.is_file()]  # nothing in the shared folder
    for sock in socks.values():
        await sock.close()
