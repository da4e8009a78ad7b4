"""Two tenants, both ways round: every route of the app's router (every method and path, /api mirrors,
HEADs, the /internal sub-application, the static catch-all) is tried by one tenant against the other's
prompt ids, files, user data, settings, users and sockets, with the case isolation_cases.CASES gives
it; a route with no case fails test_every_route_has_an_isolation_case. Nothing is concluded from a
sleep: an interrupt is checked on the prompt's own flag, sockets are read up to the caller's own
prompt, which the one publish loop delivers after anything of the victim's."""

from __future__ import annotations

import asyncio
import json
import struct

import aiohttp
import pytest
import tenant_nodes as tn
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from app_routes import app_routes, route_hit, route_key
from isolation_cases import CASES, WRITES, Ctx, Tenant, _form, _png, assert_not_interrupted, clean, stale, uncovered
from isolation_cases_assets import fill_assets

from comfy_bridge.registry import NodeRegistry
from comfy_bridge.server import ServerConfig, create_app
from comfy_bridge.server.app import SERVER_KEY
from nodes import progress
from nodes.image_io import LoadImage, SaveImage
from nodes.workspace import Workspace

SLOW_S = 120.0  # the victim's running prompt: interrupted by the victim when the routes are done


def _registry() -> NodeRegistry:
    registry = NodeRegistry()
    registry.add_builtin({**tn.CLASSES, "LoadImage": LoadImage, "SaveImage": SaveImage})
    return registry


def _safetensors(meta: dict) -> bytes:
    header = json.dumps({"__metadata__": meta}).encode()
    return struct.pack("<Q", len(header)) + header


def _config(tmp_path, **extra) -> ServerConfig:
    ws = Workspace(tmp_path / "ws").create()
    (tmp_path / "web").mkdir(exist_ok=True)
    (tmp_path / "web" / "index.html").write_text("<html>ui</html>")
    checkpoints = ws.folder_paths("checkpoints")[0]
    checkpoints.mkdir(parents=True, exist_ok=True)
    (checkpoints / "shared.safetensors").write_bytes(_safetensors({"note": "OPERATOR-META"}))
    return ServerConfig(
        workspace=ws, state_db=tmp_path / "state.sqlite3", front_end_root=tmp_path / "web", multi_user=True, **extra
    )


def check_coverage(app: web.Application) -> None:
    routes = app_routes(app)
    missing = uncovered(routes)
    assert not missing, f"routes with no isolation case in isolation_cases.CASES: {missing}"
    assert not stale(routes), f"cases for routes the app does not have: {stale(routes)}"


def test_every_route_has_an_isolation_case(tmp_path):
    app = create_app(_config(tmp_path), registry=_registry())
    check_coverage(app)
    assert len(app_routes(app)) >= 170  # 59 cases; with HEADs and /api mirrors, every route


async def _dummy(request: web.Request) -> web.Response:
    return web.json_response({"secret": "whatever"})


@pytest.mark.parametrize("where", ["app router", "server.routes (a node pack's way, mirrored under /api)"])
def test_a_route_without_a_case_fails_the_coverage_check(tmp_path, where):
    """The self-check: the app with one more route fails check_coverage, naming the route."""
    from comfy_bridge.tenancy.server import TenantPromptServer

    config = _config(tmp_path)
    if where == "app router":
        app = create_app(config, registry=_registry())
        app.router.add_post("/tenant_dummy/{id}", _dummy)
        expected = [("POST", "/tenant_dummy/{id}")]
    else:  # as create_app does, with a pack adding its route through PromptServer.instance.routes
        server = TenantPromptServer(config, registry=_registry())
        server.routes.get("/tenant_dummy")(_dummy)
        server.add_routes()
        app = server.app
        expected = [
            ("GET", "/api/tenant_dummy"),
            ("GET", "/tenant_dummy"),
            ("HEAD", "/api/tenant_dummy"),
            ("HEAD", "/tenant_dummy"),
        ]
    assert uncovered(app_routes(app)) == expected
    with pytest.raises(AssertionError, match="tenant_dummy"):
        check_coverage(app)


class World:
    def __init__(self, client: TestClient):
        self.client = client
        self.server = client.server.app[SERVER_KEY]
        self.workspace = self.server.workspace
        self.app = client.server.app

    def tenant(self, name: str) -> Tenant:
        self.server.store.add_tenant(name)
        key = self.server.store.create_key(name)
        self.server.gate._active = (0.0, False)
        return Tenant(name, {"Authorization": f"Bearer {key}"})

    async def post(self, who: Tenant, prompt: dict, **extra) -> str:
        resp = await self.client.post("/prompt", json={"prompt": prompt, **extra}, headers=who.headers)
        assert resp.status == 200, await resp.text()
        return (await resp.json())["prompt_id"]

    async def wait_history(self, who: Tenant, prompt_id: str, timeout: float = 60.0) -> dict:
        """Poll until the prompt's entry is there (the condition, not the sleep, ends the wait)."""
        async with asyncio.timeout(timeout):
            while True:
                data = await (await self.client.get(f"/history/{prompt_id}", headers=who.headers)).json()
                if prompt_id in data:
                    return data[prompt_id]
                await asyncio.sleep(0.02)

    async def fill(self, t: Tenant, value: int) -> None:
        """The tenant's data: uploads, a user, user data, a setting and a finished prompt."""
        c = self.client
        for name, data in (
            (f"{t.name}input.png", _png(f"{t.upper}-PNGTEXT")),
            (f"{t.name}model.safetensors", _safetensors({"secret": f"{t.upper}-META"})),
        ):
            assert (await c.post("/upload/image", data=_form(name, data), headers=t.headers)).status == 200
        resp = await c.post("/users", json={"username": f"{t.name}user"}, headers=t.headers)
        assert resp.status == 200, await resp.text()
        t.user_id = await resp.json()
        resp = await c.post(
            f"/userdata/workflows%2F{t.name}flow.json", data=json.dumps({f"{t.upper}-USERDATA": 1}), headers=t.headers
        )
        assert resp.status == 200
        assert (
            await c.post("/settings", json={f"{t.name}.secret": f"{t.upper}-SETTING"}, headers=t.headers)
        ).status == 200
        prompt = {
            **tn.prompt(value, prefix=f"{t.name}img"),
            "3": {"class_type": "LoadImage", "inputs": {"image": f"{t.name}input.png"}},
            "4": {"class_type": "SaveImage", "inputs": {"images": ["3", 0], "filename_prefix": f"{t.name}loaded"}},
        }
        t.done = await self.post(t, prompt)
        entry = await self.wait_history(t, t.done)
        assert entry["status"]["status_str"] == "success", entry["status"]
        t.image = f"{t.name}img_{value}.png"
        await self.fill_v2(t, value)
        await fill_assets(self.client, self.server, t)

    async def fill_v2(self, t: Tenant, value: int) -> None:
        """The tenant's Comfy API v2 data: an uploaded asset and a finished job (with an idempotency key)."""
        c = self.client
        form = aiohttp.FormData()
        form.add_field("file_path", f"{t.name}input2.png")
        form.add_field("content_type", "image/png")
        form.add_field("file", _png(f"{t.upper}-PNGTEXT-2"), filename="x.png", content_type="image/png")
        resp = await c.post("/api/v2/assets", data=form, headers=t.headers)
        assert resp.status == 201, await resp.text()
        t.v2_asset = (await resp.json())["id"]
        resp = await c.post(
            "/api/v2/jobs",
            json={"workflow": tn.prompt(value + 100, prefix=f"{t.name}img2")},
            headers={**t.headers, "Idempotency-Key": f"{t.name}-key"},
        )
        assert resp.status == 201, await resp.text()
        t.v2_job = (await resp.json())["id"]
        await self.wait_history(t, t.v2_job)
        job = await (await c.get(f"/api/v2/jobs/{t.v2_job}", headers=t.headers)).json()
        assert job["status"] == "succeeded", job
        t.v2_output, t.v2_hash = job["outputs"][0]["id"], job["outputs"][0]["hash"]
        # A model of its own (a checkpoint): listings and metadata of the shared folders must not show it.
        form = aiohttp.FormData()
        form.add_field("file_path", f"models/checkpoints/{t.name}model2.safetensors")
        form.add_field("content_type", "application/octet-stream")
        form.add_field("file", _safetensors({"secret": f"{t.upper}-META"}), filename="m.safetensors")
        resp = await c.post("/api/v2/assets", data=form, headers=t.headers)
        assert resp.status == 201, await resp.text()

    async def snapshot(self, t: Tenant) -> dict:
        out = {}
        for path in (
            "/queue",
            "/history",
            "/userdata?dir=workflows",
            f"/userdata/workflows%2F{t.name}flow.json",
            "/settings",
            "/users",
            "/internal/files/input",
            "/internal/files/output",
            "/jobs",
        ):
            resp = await self.client.get(path, headers=t.headers)
            out[path] = (resp.status, await resp.read())
        # The victim's own masks (upload_mask's positive control) are the victim's doing.
        names = json.loads(out["/internal/files/input"][1])
        out["/internal/files/input"] = sorted(n for n in names if not n.startswith(f"{t.name}mask"))
        return out


async def read_until(sock, done, timeout: float = 60.0) -> list:
    """Every message up to and including the first text message `done` accepts."""
    got = []
    async with asyncio.timeout(timeout):
        while True:
            msg = await sock.receive()
            assert msg.type in (aiohttp.WSMsgType.TEXT, aiohttp.WSMsgType.BINARY), msg
            got.append(json.loads(msg.data) if msg.type == aiohttp.WSMsgType.TEXT else msg.data)
            if isinstance(got[-1], dict) and done(got[-1]):
                return got


def _ended(prompt_id: str, types=("execution_success",)):
    return lambda m: m["type"] in types and m.get("data", {}).get("prompt_id") == prompt_id


@pytest.fixture
async def world(tmp_path):
    app = create_app(_config(tmp_path), registry=_registry())
    async with TestClient(TestServer(app)) as client:
        yield World(client)


@pytest.mark.parametrize("direction", ["bob against alice", "alice against bob"])
async def test_every_route_keeps_each_tenant_to_its_own_data(world, direction):
    alice, bob = world.tenant("alice"), world.tenant("bob")
    attacker, victim = (bob, alice) if direction.startswith("bob") else (alice, bob)
    await world.fill(alice, 11)
    await world.fill(bob, 12)
    # The victim's sockets, one per websocket route, and a prompt running and one pending behind it.
    v_socks = {
        cid: await world.client.ws_connect(f"{p}/ws?clientId={cid}", headers=victim.headers)
        for p, cid in (("", victim.cid), ("/api", victim.cid + "-api"))
    }
    victim.running = await world.post(
        victim, tn.prompt(13, prefix=f"{victim.name}slow", slow=SLOW_S), client_id=victim.cid + "-api"
    )
    victim.pending = await world.post(victim, tn.prompt(14, prefix=f"{victim.name}pending"), client_id=victim.cid)
    async with asyncio.timeout(30):
        while victim.running not in progress._prompt_flags:  # bound: it runs
            await asyncio.sleep(0.02)
    before = await world.snapshot(victim)

    routes = app_routes(world.app)
    present = set(routes)
    # Reads first, then writes; a route and its /api mirror together.
    # (A HEAD is tried with its GET; a HEAD-only route, API v2's by-hash probe, is a route of its own.)
    order = sorted(
        (m in WRITES, route_key(m, p, present), m) for m, p in routes if m != "HEAD" or ("GET", p) not in present
    )
    ctxs = {}
    for _, (key_method, key_path, prefix), _method in order:
        ctx = ctxs.setdefault(prefix, Ctx(world.client, victim, attacker, prefix, world.server, world.workspace))
        await CASES[(key_method, key_path)](ctx)
    tried = [t for ctx in ctxs.values() for t in ctx.tried]
    hit = {await route_hit(world.app, method, url) for method, url, _ in tried}
    hit |= {("GET", "/ws"), ("GET", "/api/ws")}  # the sockets, opened with ws_connect
    assert not present - hit, f"routes no request reached: {sorted(present - hit)}"

    # Nothing of the victim's changed, and its prompt still runs, uninterrupted.
    assert await world.snapshot(victim) == before
    assert_not_interrupted(ctxs[""])
    # The victim stops its own prompt with the call that did nothing for the attacker; the pending one runs.
    assert (await world.client.post("/interrupt", json={}, headers=victim.headers)).status == 200
    assert (await world.wait_history(victim, victim.running))["status"]["status_str"] == "error"
    assert (await world.wait_history(victim, victim.pending))["status"]["status_str"] == "success"
    # Positive control: the victim's sockets got its prompts' messages.
    got = await read_until(v_socks[victim.cid], _ended(victim.pending))
    assert any(m["type"] == "executed" for m in got if isinstance(m, dict))
    await read_until(v_socks[victim.cid + "-api"], _ended(victim.running, ("execution_interrupted", "execution_error")))
    # The attacker's sockets under the victim's client ids: read up to the attacker's own prompt for that
    # id, which the one publish loop delivers after every message of the victim's prompts.
    sockets = [s for ctx in ctxs.values() for s in ctx.sockets]
    assert len(sockets) == 2
    for i, (cid, sock) in enumerate(sockets):
        mine = await world.post(attacker, tn.prompt(20 + i, prefix=f"{attacker.name}final"), client_id=cid)
        got = await read_until(sock, _ended(mine))
        clean(json.dumps([m for m in got if isinstance(m, dict)]).encode(), victim, cid, ("socket", cid))
        assert not [m for m in got if not isinstance(m, dict)], "binary frames reached the attacker"
        assert all(
            m["data"]["status"]["exec_info"]["queue_remaining"] <= 1
            for m in got
            if isinstance(m, dict) and m["type"] == "status"
        )
        await sock.close()
    for sock in v_socks.values():
        await sock.close()


async def test_requests_without_a_valid_key_are_refused(hosted):
    hosted.add("alice")
    for path in ("/queue", "/history", "/object_info", "/view?filename=x.png", "/settings", "/ws"):
        assert (await hosted.client.get(path)).status == 401, path
        resp = await hosted.client.get(path, headers={"Authorization": "Bearer cc_000000000000_" + "x" * 43})
        assert resp.status == 401, path
    assert (await hosted.client.post("/prompt", json={"prompt": tn.prompt(1)})).status == 401


async def test_client_cannot_charge_another_tenant_or_reuse_its_prompt_id(hosted):
    hosted.add("alice")
    hosted.add("bob")
    out = await hosted.post_prompt("alice", tn.prompt(5), extra_data={"tenant": "bob"})
    entry = await hosted.wait_history("alice", out["prompt_id"])
    assert entry["prompt"][3]["tenant"] == "alice"
    resp = await hosted.client.post(
        "/prompt", json={"prompt": tn.prompt(6), "prompt_id": out["prompt_id"]}, headers=hosted.auth("bob")
    )
    assert resp.status == 409


async def test_single_user_on_loopback_needs_no_key_and_sees_everything(hosted):
    out = await hosted.post_prompt(None, tn.prompt(21, prefix="solo"))
    entry = await hosted.wait_history(None, out["prompt_id"])
    assert entry["outputs"]["2"]["images"][0]["filename"] == "solo_21.png"
    resp = await hosted.client.get("/view?filename=solo_21.png")
    assert resp.status == 200
    assert (hosted.server.workspace.output_dir / "solo_21.png").is_file()
