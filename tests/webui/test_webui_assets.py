"""The web UI reads models, inputs and outputs through our local assets API, as it does against today's
ComfyUI (the server's `assets` feature flag): the Model Library lists the demo checkpoints by folder, the
Media Assets panel shows the input image and, after a run, the generated image, and no asset request
fails or is refused by the frontend's schema."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlparse

import pytest

from tests.webui.browser import as_returning_user, launch, requires_chromium, wait_for_app

REPO = Path(__file__).resolve().parents[2]

pytestmark = requires_chromium


@pytest.fixture
def server(serve):
    return as_returning_user(serve())


def test_model_library_and_media_assets_through_the_assets_api(server, tmp_path):
    from playwright.sync_api import sync_playwright

    host = urlparse(server).netloc
    asset_requests: list[tuple[int, str]] = []
    schema_errors: list[str] = []
    prompt = json.loads((REPO / "workflows_json" / "text_to_image.json").read_text())
    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.on(
            "response",
            lambda r: (
                asset_requests.append((r.status, r.url))
                if urlparse(r.url).netloc == host and "/api/assets" in r.url
                else None
            ),
        )
        # The frontend's asset queries log these when an answer does not parse or fails its zod schema.
        page.on(
            "console",
            lambda m: (
                schema_errors.append(m.text)
                if m.type == "error"
                and any(s in m.text for s in ("Failed to parse asset", "Invalid asset", "asset request failed"))
                else None
            ),
        )
        page.goto(server + "/")
        wait_for_app(page, 90_000)

        page.evaluate("window.app.extensionManager.command.execute('Workspace.ToggleSidebarTab.model-library')")
        folder = page.get_by_text("checkpoints", exact=True).first
        folder.wait_for(timeout=30_000)
        folder.click()
        page.get_by_text("sd1-tiny", exact=False).first.wait_for(timeout=30_000)

        # An input of its own, the newest: the session's shared workspace holds many earlier tests' uploads, and
        # the panel's first page shows the newest inputs.
        imported = page.evaluate(
            """async () => {
            const canvas = Object.assign(document.createElement('canvas'), {width: 8, height: 8});
            const ctx = canvas.getContext('2d'); ctx.fillStyle = '#3a7'; ctx.fillRect(0, 0, 8, 8);
            const blob = await new Promise((done) => canvas.toBlob(done, 'image/png'));
            const body = new FormData();
            body.append('image', new File([blob], 'assets-panel-' + Date.now() + '.png', {type: 'image/png'}));
            const r = await window.app.api.fetchApi('/upload/image', {method: 'POST', body});
            return (await r.json()).name }"""
        )
        page.evaluate("window.app.extensionManager.command.execute('Workspace.ToggleSidebarTab.assets')")
        page.get_by_text("Imported", exact=True).first.click()
        page.locator(f"img[src*='type=input'][src*='{imported}']").first.wait_for(timeout=30_000)
        page.get_by_text("Generated", exact=True).first.click()
        prompt_id = page.evaluate(
            """async (wf) => {
            const r = await window.app.api.fetchApi('/prompt', {method: 'POST',
                body: JSON.stringify({prompt: wf, client_id: window.app.api.clientId})});
            return (await r.json()).prompt_id }""",
            prompt,
        )
        # The panel refreshes on the run's messages and shows the output, grouped under its job.
        page.locator("img[src*='type=output'][src*='ComfyUI_']").first.wait_for(timeout=180_000)
        by_the_ui = list(asset_requests)
        listed = page.evaluate("""async () => (await (await window.app.api.fetchApi(
            '/assets?tags_any=output&limit=5')).json()).assets""")
        page.screenshot(path=str(tmp_path / "webui_assets.png"))
        browser.close()
    assert any(a["job_id"] == prompt_id and a["name"].startswith("ComfyUI_") for a in listed), listed
    # The panels asked the assets API themselves (without the flag they read /experiment/models and /jobs).
    assert any("include_tags=models" in url for _, url in by_the_ui), by_the_ui
    assert any("tags_any=input" in url for _, url in by_the_ui) and any(
        "tags_any=output" in url for _, url in by_the_ui
    )
    assert all(status < 400 for status, _ in asset_requests), asset_requests
    assert schema_errors == []
