"""The official web UI previews a saved video: workflows_json/video.ui.json (and the Wan 2.2 14B
image-to-video template's workflow, wan22_i2v.ui.json, on the tiny Wan files) opened in a real browser and
run, the Save Video node shows a video player whose source is the MP4 that /view serves as video/mp4, and
the browser reads the video's metadata (its size: the demo's 128 x 128, Wan's 64 x 64)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.webui.browser import as_returning_user, launch, requires_chromium, wait_for_app

REPO = Path(__file__).resolve().parents[2]

pytestmark = requires_chromium


@pytest.fixture
def server(serve):
    base = serve()
    return as_returning_user(base)


# workflow file, the file name prefix its SaveVideo writes, the video's size
CASES = [("video.ui.json", "ComfyUI_", 128), ("wan22_i2v.ui.json", "Wan2.2_i2v_", 64), ("template", "Wan2.2_i2v_", 64)]


@pytest.mark.parametrize(("name", "prefix", "size"), CASES, ids=[c[0].split(".")[0] for c in CASES])
def test_save_video_node_shows_the_video(server, tmp_path, name: str, prefix: str, size: int):
    from playwright.sync_api import sync_playwright

    if name == "template":  # the web UI's own template, its subgraph kept, our tiny files in its widgets
        from scripts.wan_template_workflow import tiny_template

        workflow = tiny_template()
    else:
        workflow = json.loads((REPO / "workflows_json" / name).read_text())
    with sync_playwright() as p:
        browser = launch(p, "--autoplay-policy=no-user-gesture-required")
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.goto(server + "/")
        wait_for_app(page, 90_000)
        page.evaluate("async ([w, n]) => { await window.app.loadGraphData(w, true, true, n) }", [workflow, name])
        assert page.evaluate("() => window.app.graph.findNodesByType('SaveVideo').length") == 1
        page.locator("canvas#graph-canvas").click(position={"x": 300, "y": 700})
        page.keyboard.press(".")  # fit the graph in view, so the Save Video node is drawn
        with page.expect_response(lambda r: "/view?" in r.url and ".mp4" in r.url, timeout=180_000) as view:
            page.get_by_role("button", name="Run", exact=True).first.click()
        response = view.value
        # the video element asks for byte ranges, which /view answers (206) as ComfyUI's aiohttp FileResponse does
        assert response.status in (200, 206) and response.headers["content-type"] == "video/mp4"
        page.wait_for_function(
            """() => [...document.querySelectorAll('video')].some(
                                      v => v.src.includes('/view?') && v.src.includes('.mp4') && v.readyState >= 1)""",
            timeout=60_000,
        )
        shown = page.evaluate("""() => { const v = [...document.querySelectorAll('video')].find(
                                     v => v.src.includes('.mp4'));
                                 return {src: v.src, width: v.videoWidth, height: v.videoHeight} }""")
        page.screenshot(path=str(tmp_path / "webui_video.png"))
        browser.close()
    assert f"filename={prefix}" in shown["src"] and "subfolder=video" in shown["src"]
    assert (shown["width"], shown["height"]) == (size, size)
