"""The official web UI works against our server in a real browser: load the default workflow on the
demo checkpoint, press Run, and the Save Image node shows the generated image fetched via /view."""

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


def test_run_button_shows_generated_image(server, tmp_path):
    from playwright.sync_api import sync_playwright

    prompt = json.loads((REPO / "workflows_json" / "text_to_image.json").read_text())
    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.goto(server + "/")
        wait_for_app(page, 90_000)
        page.evaluate("async (p) => { await window.app.loadApiJson(p, 'text_to_image.json') }", prompt)
        ckpt = page.evaluate("""() => window.app.graph.findNodesByType('CheckpointLoaderSimple')[0]
                                .widgets.find(w => w.name === 'ckpt_name').value""")
        assert ckpt == "sd1-tiny.safetensors"
        # Fit the whole graph in view, so the Save Image node is drawn and loads its image.
        page.locator("canvas#graph-canvas").click(position={"x": 300, "y": 700})
        page.keyboard.press(".")
        with page.expect_response(
            lambda r: "/view?" in r.url and "filename=ComfyUI_" in r.url, timeout=120_000
        ) as view:
            page.get_by_role("button", name="Run", exact=True).first.click()
        response = view.value
        assert response.status == 200
        assert response.headers["content-type"].startswith("image/png")
        page.wait_for_function(
            """() => { const n = window.app.graph.findNodesByType('SaveImage')[0];
                                  return n && n.imgs && n.imgs.length > 0 && n.imgs[0].complete
                                         && n.imgs[0].naturalWidth > 0 }""",
            timeout=60_000,
        )
        shown = page.evaluate("""() => { const img = window.app.graph.findNodesByType('SaveImage')[0].imgs[0];
                                 return {src: img.src, width: img.naturalWidth} }""")
        assert "/view?" in shown["src"] and "filename=ComfyUI_" in shown["src"]
        width = shown["width"]
        page.screenshot(path=str(tmp_path / "webui_after_run.png"))
        browser.close()
    assert width == prompt["5"]["inputs"]["width"]
