"""The web UI out of the box: on a fresh workspace (a user folder nobody has used) the page loads with no
failed request and no console error, opens no graph with missing nodes, and its Templates dialog, which
the frontend opens for a first-time user, lists the core templates."""

from __future__ import annotations

from urllib.parse import urlparse

from tests.webui.browser import launch, requires_chromium, wait_for_app

pytestmark = requires_chromium


def test_fresh_workspace_opens_clean_with_templates(serve, tmp_path):
    from playwright.sync_api import sync_playwright

    base = serve("--user-directory", str(tmp_path / "fresh_user"))
    host = urlparse(base).netloc
    failed: list[str] = []  # requests of ours that answered >= 400 or did not complete
    errors: list[str] = []  # console errors and uncaught page errors
    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})

        def on_response(response):
            if urlparse(response.url).netloc == host and response.status >= 400:
                failed.append(f"{response.status} {response.request.method} {response.url}")

        def on_failed(request):
            # Offline, the release-notes check to api.comfy.org cannot resolve; that is not our server.
            # A request the page itself aborts (ERR_ABORTED, e.g. a superseded thumbnail) is no failure.
            if urlparse(request.url).netloc == host and "ERR_ABORTED" not in (request.failure or ""):
                failed.append(f"{request.failure} {request.method} {request.url}")

        def on_console(msg):
            if msg.type == "error" and "api.comfy.org" not in msg.text and "ERR_NAME_NOT_RESOLVED" not in msg.text:
                errors.append(msg.text)

        page.on("response", on_response)
        page.on("requestfailed", on_failed)
        page.on("console", on_console)
        page.on("pageerror", lambda exc: errors.append(f"pageerror: {exc}"))
        page.goto(base + "/")
        wait_for_app(page, 90_000)

        # A first-time user: the frontend opens the Templates dialog by itself; it lists the core templates.
        dialog = page.locator("[role=dialog]").filter(has_text="Templates").first
        dialog.wait_for(timeout=60_000)
        cards = page.locator("[data-testid^='template-workflow-']")
        cards.first.wait_for(timeout=60_000)
        assert cards.count() >= 5
        page.wait_for_load_state("networkidle", timeout=60_000)
        # The graph that opened has no node type the server does not offer, and no missing-node warning.
        missing = page.evaluate("""() => window.app.graph.nodes
                                      .filter(n => !window.LiteGraph.registered_node_types[n.type])
                                      .map(n => n.type)""")
        page.screenshot(path=str(tmp_path / "webui_fresh_start.png"))
        missing_dialog = page.get_by_text("Missing Node", exact=False).count()
        browser.close()
    assert missing == []
    assert missing_dialog == 0
    assert failed == [], failed
    assert errors == [], errors
