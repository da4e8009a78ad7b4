"""Server-wide routes, static web UI, middlewares, and routes added by node packs."""

import json
import logging
import struct
from pathlib import Path

from aiohttp import web

from comfy_bridge.server import PromptServer, ServerConfig, create_app
from comfy_bridge.server.app import SERVER_KEY

from .conftest import make_registry
from .server_nodes import CLASSES, StubBrokenInfo


async def test_system_stats_and_features(client):
    stats = await (await client.get("/api/system_stats")).json()
    assert set(stats) == {"system", "devices"}
    assert {
        "os",
        "ram_total",
        "ram_free",
        "comfyui_version",
        "python_version",
        "pytorch_version",
        "embedded_python",
        "argv",
    } <= set(stats["system"])
    dev = stats["devices"][0]
    assert {"name", "type", "index", "vram_total", "vram_free", "torch_vram_total", "torch_vram_free"} <= set(dev)
    assert await (await client.get("/features")).json() == {
        "supports_preview_metadata": True,
        "max_upload_size": 104857600,
        "assets": True,
        "supports_model_type_tags": True,
        "node_replacements": True,
    }


async def test_models_and_embeddings(client, workspace):
    (workspace.models_dir / "checkpoints" / "sub").mkdir(parents=True, exist_ok=True)
    (workspace.models_dir / "checkpoints" / "sub" / "b.safetensors").write_bytes(b"x")
    (workspace.models_dir / "checkpoints" / "a.ckpt").write_bytes(b"x")
    (workspace.models_dir / "checkpoints" / "put_here").write_bytes(b"")
    (workspace.models_dir / "embeddings" / "easyneg.pt").write_bytes(b"x")
    keys = await (await client.get("/models")).json()
    assert "checkpoints" in keys and "custom_nodes" in keys and "clip" not in keys
    assert await (await client.get("/api/models/checkpoints")).json() == ["a.ckpt", "sub/b.safetensors"]
    assert (await client.get("/models/nope")).status == 404
    assert await (await client.get("/embeddings")).json() == ["easyneg"]
    folders = await (await client.get("/api/experiment/models")).json()
    names = [f["name"] for f in folders]
    assert "checkpoints" in names and "configs" not in names and "custom_nodes" not in names
    files = await (await client.get("/api/experiment/models/checkpoints")).json()
    assert sorted(f["name"] for f in files) == ["a.ckpt", "sub/b.safetensors"]
    assert {"pathIndex", "modified", "created", "size"} <= set(files[0])
    assert (await client.get("/api/experiment/models/nope")).status == 404
    assert (await client.get("/api/experiment/models/preview/checkpoints/0/a.ckpt")).status == 404


async def test_object_info_all_and_one(client):
    info = await (await client.get("/api/object_info")).json()
    assert set(info) == set(CLASSES)
    one = await (await client.get("/object_info/StubImage")).json()
    assert one["StubImage"]["display_name"] == "Stub Image"
    assert one["StubImage"]["input"] == {"required": {"width": ["INT", {"default": 8, "min": 1, "max": 64}]}}
    assert await (await client.get("/object_info/DoesNotExist")).json() == {}


async def test_object_info_skips_broken_node(make_client):
    client = await make_client(registry=make_registry({"StubBrokenInfo": StubBrokenInfo}))
    info = await (await client.get("/object_info")).json()
    assert "StubBrokenInfo" not in info and "StubImage" in info


async def test_frontend_index_and_static_and_extensions(make_client, tmp_path):
    pack_web = tmp_path / "pack_web"
    (pack_web / "js").mkdir(parents=True)
    (pack_web / "js" / "ext.js").write_text("// pack")
    client = await make_client(registry=make_registry(web_directories={"my pack": pack_web}))
    r = await client.get("/")
    assert r.status == 200 and "fake ui" in await r.text()
    assert r.headers["Cache-Control"] == "no-cache"
    r = await client.get("/app.js")
    assert r.status == 200 and r.headers["Cache-Control"] == "no-cache"
    assert await (await client.get("/api/extensions")).json() == [
        "/extensions/core/widgets.js",
        "/extensions/my%20pack/js/ext.js",
    ]
    r = await client.get("/extensions/my%20pack/js/ext.js")
    assert r.status == 200 and await r.text() == "// pack"


async def test_default_web_root_is_the_frontend_package(workspace):
    import comfyui_frontend_package

    app = create_app(ServerConfig(workspace=workspace), registry=make_registry())
    expected = Path(comfyui_frontend_package.__file__).parent / "static"
    assert app[SERVER_KEY].web_root == expected
    from aiohttp.test_utils import TestClient, TestServer

    async with TestClient(TestServer(app)) as client:
        r = await client.get("/")
        assert r.status == 200 and "<html" in (await r.text()).lower()
        script = next((expected / "assets").glob("*.js")).name
        r = await client.get(f"/assets/{script}")
        assert r.status == 200 and "javascript" in r.headers["Content-Type"]


async def test_custom_node_pack_files(client, workspace):
    pack = workspace.root / "custom_nodes" / "mypack"
    (pack / "example_workflows").mkdir(parents=True)
    (pack / "example_workflows" / "demo.json").write_text('{"nodes": []}')
    (pack / "locales" / "en").mkdir(parents=True)
    (pack / "locales" / "en" / "main.json").write_text('{"hello": "Hello"}')
    (pack / "locales" / "en" / "nodeDefs.json").write_text('{"MyNode": {"display_name": "Mine"}}')
    assert await (await client.get("/api/workflow_templates")).json() == {"mypack": ["demo"]}
    assert await (await client.get("/api/i18n")).json() == {
        "en": {"hello": "Hello", "nodeDefs": {"MyNode": {"display_name": "Mine"}}}
    }


async def test_example_workflows_served_statically(make_client, workspace):
    pack = workspace.root / "custom_nodes" / "my pack"
    (pack / "examples").mkdir(parents=True)
    (pack / "examples" / "demo.json").write_text('{"nodes": []}')
    client = await make_client()
    r = await client.get("/api/workflow_templates/my%20pack/demo.json")
    assert r.status == 200 and json.loads(await r.text()) == {"nodes": []}
    assert (await client.get("/api/workflow_templates/my%20pack/..%2F..%2Fx.json")).status in (403, 404)


async def test_internal_routes(client, workspace):
    logging.getLogger("some.node.pack").warning("hello from a pack")
    raw = await (await client.get("/internal/logs/raw")).json()
    assert any("hello from a pack" in e["m"] for e in raw["entries"])
    assert set(raw["size"]) == {"cols", "rows"}
    assert "hello from a pack" in await (await client.get("/internal/logs")).json()
    paths = await (await client.get("/internal/folder_paths")).json()
    assert paths["checkpoints"] == [str(workspace.models_dir / "checkpoints")]
    ws = await client.ws_connect("/ws?clientId=logs")
    await ws.receive_json(timeout=5)
    r = await client.patch("/internal/logs/subscribe", json={"clientId": "logs", "enabled": True})
    assert r.status == 200
    logging.getLogger("some.node.pack").warning("pushed line")
    msg = await ws.receive_json(timeout=5)
    assert msg["type"] == "logs" and "pushed line" in msg["data"]["entries"][0]["m"]
    await ws.close()


async def test_origin_guard_blocks_foreign_origin_on_loopback(client):
    host = f"127.0.0.1:{client.port}"
    r = await client.get("/prompt", headers={"Host": host, "Origin": "http://evil.com"})
    assert r.status == 403
    r = await client.get("/prompt", headers={"Host": host, "Origin": f"http://127.0.0.1:{client.port}"})
    assert r.status == 200
    assert (await client.options("/prompt")).status == 200


async def test_cors_header_option(make_client):
    client = await make_client(enable_cors_header="*")
    r = await client.get("/prompt", headers={"Origin": "http://evil.com", "Host": f"127.0.0.1:{client.port}"})
    assert r.status == 200 and r.headers["Access-Control-Allow-Origin"] == "*"
    r = await client.options("/prompt")
    assert r.status == 200 and "POST" in r.headers["Access-Control-Allow-Methods"]


async def test_pack_routes_added_through_instance_get_api_mirror(workspace, web_root):
    def load_pack():
        """What a pack does while create_app builds the registry: add a route to PromptServer.instance."""
        routes = PromptServer.instance.routes

        @routes.get("/mypack/hello")
        async def hello(request):
            return web.json_response({"hi": True})

        return make_registry()

    config = ServerConfig(workspace=workspace, front_end_root=web_root)
    server = PromptServer(config)
    server.registry = load_pack()  # what create_app does when it builds the registry
    server.add_routes()
    from aiohttp.test_utils import TestClient, TestServer

    async with TestClient(TestServer(server.app)) as client:
        assert await (await client.get("/mypack/hello")).json() == {"hi": True}
        assert await (await client.get("/api/mypack/hello")).json() == {"hi": True}


async def test_binary_event_with_raw_bytes_and_bad_data(client):
    ws = await client.ws_connect("/ws?clientId=b")
    await ws.receive_json(timeout=5)
    server = PromptServer.instance
    server.send_sync(1, object(), "b")  # undeliverable: logged, the publisher survives
    server.send_sync(3, b"\x00\x00\x00\x01n" + b"text", "b")
    frame = await ws.receive_bytes(timeout=5)
    assert struct.unpack(">I", frame[:4])[0] == 3
    await ws.close()


async def test_extension_static_refuses_traversal(make_client, tmp_path):
    pack_web = tmp_path / "pack_web"
    pack_web.mkdir()
    (tmp_path / "secret.js").write_text("secret")
    client = await make_client(registry=make_registry(web_directories={"p": pack_web}))
    for url in ("/extensions/p/..%2Fsecret.js", "/extensions/p/%2e%2e/secret.js", "/extensions/..%2F..%2Fx/y.js"):
        r = await client.get(url)
        assert r.status in (403, 404), url
        assert "secret" not in await r.text()
    assert (await client.get("/extensions/core/widgets.js")).status == 200


async def test_packs_loaded_after_a_server_stopped_get_a_live_stub(make_client):
    """A stopped server's app is frozen; a pack that adds a startup hook at import (comfyui-deploy does)
    must not fail because an earlier server in the same process ran and stopped."""
    from comfy_bridge.compat import server as compat_server

    client = await make_client()
    assert compat_server.PromptServer.instance is not None
    await client.close()
    stub = compat_server.PromptServer.instance
    stub.app.on_startup.append(lambda app: None)  # raised "Cannot modify frozen list" before
    stub.routes.get("/after_stop")(lambda request: None)
