"""A node pack's frontend extension in the official web UI, in headless Chromium: the pack is installed
with `nodes install` into a workspace of its own, and the UI loads its WEB_DIRECTORY JS (the extension
registers and hooks the pack's node definition), lists the pack's node among LiteGraph's node types
and adds it to the graph."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from comfy_bridge.packs.manage import install_pack
from nodes.workspace import Workspace
from tests.webui.browser import as_returning_user, launch, requires_chromium, wait_for_app

FIXTURE_PACK = Path(__file__).parent / "fixture_web_pack"

pytestmark = requires_chromium


@pytest.fixture(scope="module")
def pack_workspace(tmp_path_factory, demo_workspace) -> Workspace:
    """A workspace of its own (the shared demo one keeps no test pack), its models linked to the demo ones."""
    root = tmp_path_factory.mktemp("web_pack_ws")
    (root / "models").symlink_to(demo_workspace.models_dir, target_is_directory=True)
    ws = Workspace(root).create()
    install_pack(ws, str(FIXTURE_PACK))
    return ws


@pytest.fixture(scope="module")
def server(serve, pack_workspace):
    # The fixture passes the demo workspace first; argparse keeps the last --workspace.
    base = serve("--workspace", str(pack_workspace.root), "--executors", "0")
    return as_returning_user(base)


def test_server_lists_the_installed_pack_extension(server):
    extensions = json.loads(urllib.request.urlopen(server + "/extensions").read())
    assert "/extensions/fixture_web_pack/web_pack.js" in extensions
    info = json.loads(urllib.request.urlopen(server + "/object_info/WebPackNode").read())["WebPackNode"]
    assert info["display_name"] == "Web Pack Gain"
    assert info["python_module"] == "custom_nodes.fixture_web_pack"


def test_web_ui_loads_the_pack_extension_and_adds_its_node(server, tmp_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda err: errors.append(str(err)))
        page.goto(server + "/")
        wait_for_app(page, 90_000)
        page.wait_for_function("window.__webPackSetup === true", timeout=30_000)
        names = page.evaluate("() => (window.app.extensions || []).map(e => e.name)")
        assert "web_pack.marker" in names
        node = page.evaluate("""() => {
            const LG = window.LiteGraph ?? window.comfyAPI?.litegraph?.LiteGraph;
            const registered = "WebPackNode" in LG.registered_node_types;
            window.app.graph.clear();   // an empty canvas, so the screenshot shows the pack's node alone
            const before = window.app.graph.findNodesByType("WebPackNode").length;
            const n = LG.createNode("WebPackNode");
            n.pos = [400, 300];
            window.app.graph.add(n);
            window.app.canvas.setDirty(true, true);
            return {registered, before, title: n.title, decorated: n.webPackDecorated === true,
                    widgets: (n.widgets || []).map(w => [w.name, w.value]),
                    inputs: (n.inputs || []).map(i => i.type),
                    after: window.app.graph.findNodesByType("WebPackNode").length};
        }""")
        page.screenshot(path=str(tmp_path / "web_pack_extension.png"))
        browser.close()
    assert node["registered"] and node["before"] == 0 and node["after"] == 1
    assert node["title"] == "Web Pack Gain"
    assert node["decorated"], "the pack's beforeRegisterNodeDef hook did not run on its node"
    assert ["gain", 1.5] in node["widgets"] and "IMAGE" in node["inputs"]
    assert (tmp_path / "web_pack_extension.png").stat().st_size > 0
    assert not [e for e in errors if "web_pack" in e], errors
