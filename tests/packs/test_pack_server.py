"""The server with the fixture packs: it starts although one pack fails to import, /object_info lists
the pack nodes, a pack's WEB_DIRECTORY is listed by /extensions and served, the routes a pack adds
through PromptServer.instance.routes answer (also under /api), and example workflows are listed by
/workflow_templates."""

from __future__ import annotations

import pytest
from aiohttp.test_utils import TestClient, TestServer

from comfy_bridge.server import ServerConfig, create_app


@pytest.fixture
async def client(packs_ws, tmp_path):
    web_root = tmp_path / "web"
    web_root.mkdir()
    (web_root / "index.html").write_text("<html></html>")
    app = create_app(ServerConfig(workspace=packs_ws, front_end_root=web_root))
    c = TestClient(TestServer(app))
    await c.start_server()
    yield c
    await c.close()


async def test_server_serves_pack_nodes_web_dirs_routes_and_templates(client):
    info = await (await client.get("/object_info")).json()
    assert {"V1Invert", "V3Scale", "ExtraDouble", "PatchCFG"} <= set(info)
    assert info["V1Invert"]["display_name"] == "Invert (v1 pack)"
    extensions = await (await client.get("/extensions")).json()
    assert "/extensions/v1_pack/v1_pack.js" in extensions
    r = await client.get("/extensions/v1_pack/v1_pack.js")
    assert r.status == 200 and "registerExtension" in await r.text()
    for path in ("/v1_pack/hello", "/api/v1_pack/hello"):
        assert await (await client.get(path)).json() == {"hello": "v1_pack", "prestartup": "ran"}
    templates = await (await client.get("/workflow_templates")).json()
    assert templates == {"v1_pack": ["v1_demo"]}
