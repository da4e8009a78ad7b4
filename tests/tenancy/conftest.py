"""A hosted server (TenantPromptServer) on the real engine with the tiny nodes of tenant_nodes,
and helpers to act as a tenant."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

sys.path.insert(0, str(Path(__file__).parent))

import tenant_nodes  # noqa: E402

from comfy_bridge.server import ServerConfig, create_app  # noqa: E402
from comfy_bridge.server.app import SERVER_KEY  # noqa: E402
from nodes import progress  # noqa: E402
from nodes.workspace import Workspace  # noqa: E402


@pytest.fixture(autouse=True)
def restore_globals():
    from comfy_bridge.server import PromptServer
    from nodes import workspace as workspace_mod

    active = workspace_mod._active
    yield
    workspace_mod._active = active
    PromptServer.instance = None
    progress.interrupt(False)


class Hosted:
    def __init__(self, client: TestClient):
        self.client = client
        self.server = client.server.app[SERVER_KEY]
        self.store = self.server.store
        self.keys: dict[str, str] = {}

    def add(self, name: str, **limits) -> dict:
        self.store.add_tenant(name, **limits)
        self.keys[name] = self.store.create_key(name)
        self.server.gate._active = (0.0, False)  # re-read "any tenant?" now, not in a second
        return self.auth(name)

    def auth(self, name: str) -> dict:
        return {"Authorization": f"Bearer {self.keys[name]}"}

    async def post_prompt(self, name: str | None, prompt: dict, **extra) -> dict:
        headers = self.auth(name) if name else {}
        resp = await self.client.post("/prompt", json={"prompt": prompt, **extra}, headers=headers)
        assert resp.status == 200, await resp.text()
        return await resp.json()

    async def wait_running(self, name: str | None, prompt_id: str, timeout: float = 20.0) -> None:
        """Until the prompt runs: an interrupt reaches only a running prompt (as in ComfyUI), so a test that
        interrupts one must not race its start (on a loaded machine the start takes longer)."""
        headers = self.auth(name) if name else {}
        deadline = asyncio.get_running_loop().time() + timeout
        while asyncio.get_running_loop().time() < deadline:
            queue = await (await self.client.get("/queue", headers=headers)).json()
            if any(item[1] == prompt_id for item in queue["queue_running"]):
                return
            await asyncio.sleep(0.05)
        raise TimeoutError(prompt_id)

    async def wait_history(self, name: str | None, prompt_id: str, timeout: float = 20.0) -> dict:
        headers = self.auth(name) if name else {}
        deadline = asyncio.get_running_loop().time() + timeout
        while asyncio.get_running_loop().time() < deadline:
            resp = await self.client.get(f"/history/{prompt_id}", headers=headers)
            data = await resp.json()
            if prompt_id in data:
                return data[prompt_id]
            await asyncio.sleep(0.05)
        raise TimeoutError(prompt_id)


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path / "ws").create()


@pytest.fixture
async def hosted(workspace, tmp_path):
    tenant_nodes.RUNS.clear()
    config = ServerConfig(workspace=workspace, state_db=tmp_path / "state.sqlite3", front_end_root=tmp_path / "web")
    (tmp_path / "web").mkdir()
    (tmp_path / "web" / "index.html").write_text("<html>ui</html>")
    app = create_app(config, registry=tenant_nodes.registry())
    async with TestClient(TestServer(app)) as client:
        yield Hosted(client)
