"""The official web UI previews a saved video: workflows_json/video.ui.json opened in a real browser and
run, the Save Video node shows a video player whose source is the MP4 that /view serves as video/mp4, and
the browser reads the video's metadata (its size, the demo's 128 x 128)."""
from __future__ import annotations

import json
import os
import shutil
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--autoplay-policy=no-user-gesture-required"]

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed "
                                "(.ci/run installs it)")


@pytest.fixture
def server(serve):
    base = serve()
    # A returning user gets a graph instead of the first-run templates dialog.
    req = urllib.request.Request(base + "/api/settings/Comfy.TutorialCompleted", data=b"true", method="POST")
    urllib.request.urlopen(req).read()
    return base


def test_save_video_node_shows_the_video(server, tmp_path):
    from playwright.sync_api import sync_playwright
    workflow = json.loads((REPO / "workflows_json" / "video.ui.json").read_text())
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.goto(server + "/")
        page.wait_for_function("window.app && window.app.graph && !document.querySelector('#splash-loader')",
                               timeout=90_000)
        page.evaluate("async (w) => { await window.app.loadGraphData(w, true, true, 'video.ui.json') }", workflow)
        assert page.evaluate("() => window.app.graph.findNodesByType('SaveVideo').length") == 1
        page.locator("canvas#graph-canvas").click(position={"x": 300, "y": 700})
        page.keyboard.press(".")   # fit the graph in view, so the Save Video node is drawn
        with page.expect_response(lambda r: "/view?" in r.url and ".mp4" in r.url, timeout=180_000) as view:
            page.get_by_role("button", name="Run", exact=True).first.click()
        response = view.value
        # the video element asks for byte ranges, which /view answers (206) as ComfyUI's aiohttp FileResponse does
        assert response.status in (200, 206) and response.headers["content-type"] == "video/mp4"
        page.wait_for_function("""() => [...document.querySelectorAll('video')].some(
                                      v => v.src.includes('/view?') && v.src.includes('.mp4') && v.readyState >= 1)""",
                               timeout=60_000)
        shown = page.evaluate("""() => { const v = [...document.querySelectorAll('video')].find(
                                     v => v.src.includes('.mp4'));
                                 return {src: v.src, width: v.videoWidth, height: v.videoHeight} }""")
        page.screenshot(path=str(tmp_path / "webui_video.png"))
        browser.close()
    assert "filename=ComfyUI_" in shown["src"] and "subfolder=video" in shown["src"]
    assert (shown["width"], shown["height"]) == (128, 128)
