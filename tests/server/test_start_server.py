"""start_server / run_server as the CLI calls them: real sockets on a free port."""

import asyncio
import socket
import time

import aiohttp

from comfy_bridge.server import ServerConfig, run_server, start_server
from tests.conftest import free_port

from .conftest import make_registry, simple_prompt


async def test_start_server_serves_http_and_runs_prompts(workspace, web_root):
    port = free_port()
    config = ServerConfig(listen="127.0.0.1", port=port, workspace=workspace, front_end_root=web_root)
    runner = await start_server(config, registry=make_registry())
    try:
        async with aiohttp.ClientSession() as session:
            base = f"http://127.0.0.1:{port}"
            async with session.get(base + "/api/prompt") as r:
                assert await r.json() == {"exec_info": {"queue_remaining": 0}}
            async with session.post(base + "/prompt", json={"prompt": simple_prompt(), "prompt_id": "live"}) as r:
                assert r.status == 200
            deadline = time.monotonic() + 30
            while True:
                async with session.get(base + "/history/live") as r:
                    entry = (await r.json()).get("live")
                if entry is not None:
                    break
                assert time.monotonic() < deadline, "prompt never finished"
                await asyncio.sleep(0.01)
            assert entry["status"]["status_str"] == "success"
            assert entry["outputs"]["2"]["images"][0]["filename"] == "stub.png"
    finally:
        await runner.cleanup()
    with socket.socket() as s:  # the port is released after cleanup
        s.bind(("127.0.0.1", port))


def test_run_server_quick_test_for_ci_returns(workspace, web_root):
    config = ServerConfig(port=free_port(), workspace=workspace, front_end_root=web_root, quick_test_for_ci=True)
    started = time.monotonic()
    run_server(config, registry=make_registry())
    assert time.monotonic() - started < 30
