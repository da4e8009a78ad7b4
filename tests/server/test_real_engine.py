"""The server on the real engine (registry, validation, executor, custom node loading): a model-free
prompt runs end to end, invalid prompts are refused, a pack's routes and web directory are served."""

import io
import textwrap

import pytest
from aiohttp.test_utils import TestClient, TestServer
from PIL import Image

from comfy_bridge.server import ServerConfig, create_app

from .conftest import receive_json_until, wait_history

PACK = textwrap.dedent("""
    from aiohttp import web
    from server import PromptServer

    WEB_DIRECTORY = "./web"

    @PromptServer.instance.routes.get("/hello_pack/ping")
    async def ping(request):
        return web.json_response({"pong": True})

    class PackInvert:
        @classmethod
        def INPUT_TYPES(cls):
            return {"required": {"image": ("IMAGE",)}}
        RETURN_TYPES = ("IMAGE",)
        FUNCTION = "run"
        CATEGORY = "pack"

        def run(self, image):
            return (1.0 - image,)

    NODE_CLASS_MAPPINGS = {"PackInvert": PackInvert}
""")


@pytest.fixture
async def real_client(workspace, web_root):
    app = create_app(ServerConfig(workspace=workspace, front_end_root=web_root))
    client = TestClient(TestServer(app))
    await client.start_server()
    yield client
    await client.close()


@pytest.fixture
async def pack_client(workspace, web_root):
    pack = workspace.root / "custom_nodes" / "hello_pack"
    (pack / "web").mkdir(parents=True)
    (pack / "__init__.py").write_text(PACK)
    (pack / "web" / "hello.js").write_text("// hello")
    app = create_app(ServerConfig(workspace=workspace, front_end_root=web_root))
    client = TestClient(TestServer(app))
    await client.start_server()
    yield client
    await client.close()


PROMPT = {
    "1": {"class_type": "EmptyImage", "inputs": {"width": 8, "height": 8, "batch_size": 1, "color": 0}},
    "2": {"class_type": "ImageInvert", "inputs": {"image": ["1", 0]}},
    "3": {"class_type": "SaveImage", "inputs": {"images": ["2", 0], "filename_prefix": "real"}},
}


async def test_real_prompt_runs_and_is_viewable(real_client):
    client = real_client
    ws = await client.ws_connect("/ws?clientId=real")
    await ws.receive_json(timeout=5)
    r = await client.post("/prompt", json={"prompt": PROMPT, "client_id": "real"})
    assert r.status == 200, await r.text()
    pid = (await r.json())["prompt_id"]
    msgs = await receive_json_until(ws, lambda m: m["type"] == "executing" and m["data"]["node"] is None, timeout=60)
    kinds = [m["type"] for m in msgs if isinstance(m, dict)]
    assert kinds[:3] == ["status", "status", "execution_start"]
    assert "execution_success" in kinds and kinds[-2:] == ["status", "executing"]
    executed = [m["data"] for m in msgs if isinstance(m, dict) and m["type"] == "executed"]
    image = executed[0]["output"]["images"][0]
    r = await client.get(
        "/view", params={"filename": image["filename"], "subfolder": image["subfolder"], "type": image["type"]}
    )
    assert r.status == 200
    pixel = Image.open(io.BytesIO(await r.read())).convert("RGB").getpixel((0, 0))
    assert pixel == (255, 255, 255)  # the black image, inverted
    entry = await wait_history(client, pid)
    assert entry["status"]["status_str"] == "success" and "3" in entry["outputs"]
    await ws.close()


async def test_real_validation_refuses_bad_prompts(real_client):
    bad = {
        **PROMPT,
        "1": {"class_type": "EmptyImage", "inputs": {"width": 0, "height": 8, "batch_size": 1, "color": 0}},
    }
    r = await real_client.post("/prompt", json={"prompt": bad})
    assert r.status == 400
    body = await r.json()
    assert body["error"]["type"] == "prompt_outputs_failed_validation" and "1" in body["node_errors"]
    r = await real_client.post("/prompt", json={"prompt": {"1": {"class_type": "Nope", "inputs": {}}}})
    assert r.status == 400 and (await r.json())["error"]["type"] == "invalid_prompt"
    # a refused prompt is never enqueued (the 400 is answered before any queueing), so nothing can run
    assert await (await real_client.get("/queue")).json() == {"queue_running": [], "queue_pending": []}
    assert await (await real_client.get("/history")).json() == {}


async def test_pack_route_and_web_directory_are_served(pack_client):
    real_client = pack_client
    assert await (await real_client.get("/hello_pack/ping")).json() == {"pong": True}
    assert await (await real_client.get("/api/hello_pack/ping")).json() == {"pong": True}
    exts = await (await real_client.get("/extensions")).json()
    assert "/extensions/hello_pack/hello.js" in exts
    assert (await real_client.get("/extensions/hello_pack/hello.js")).status == 200
    info = await (await real_client.get("/object_info/PackInvert")).json()
    assert info["PackInvert"]["python_module"].endswith("hello_pack")
    pack_prompt = {**PROMPT, "2": {"class_type": "PackInvert", "inputs": {"image": ["1", 0]}}}
    r = await real_client.post("/prompt", json={"prompt": pack_prompt, "prompt_id": "pack"})
    assert r.status == 200
    assert (await wait_history(real_client, "pack", timeout=60))["status"]["status_str"] == "success"
