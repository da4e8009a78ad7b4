"""A new user runs the web UI's Wan 2.2 14B image-to-video template: on a fresh workspace they open it from the
Templates dialog (search, click the card), pick the tiny Wan files in its model combos, make the clip small
(64 x 64, 0.25 s at 16 fps, 6 steps), press Run, and the Save Video node plays the MP4 that /view serves: a
<video> whose source is our /view and which has decoded a frame. No request to our server fails and the
console shows no error.

The template's sample input image is fetched by the frontend from GitHub and uploaded to our /upload/image;
offline, the test answers that request with the workspace's example image (as test_webui_templates does).
The frontend's calls to other hosts (release notes, model-link checks) cannot resolve and are not ours."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlparse

from scripts.wan_template_workflow import INNER, SUBSTITUTE
from tests.webui.browser import launch, requires_chromium, wait_for_app

pytestmark = requires_chromium

TEMPLATE = "video_wan2_2_14B_i2v"

# What a user changes on the template's subgraph node (its promoted widgets, by name) and, inside the
# subgraph, on the step-count primitives: the values the committed wan22_i2v workflow uses, so the frontend
# gets the same graph the engine's Wan tests run.
SET_WIDGETS = """([outer, inner]) => {
  const node = window.app.rootGraph.nodes.find(n => n.subgraph);
  for (const [name, value] of Object.entries(outer)) {
    const w = node.widgets.find(w => w.name === name);
    if (!w) throw new Error('no widget ' + name);
    if (w.options?.values && !w.options.values.includes(value)) throw new Error(name + ' offers no ' + value);
    w.value = value;
    w.callback?.(value);
  }
  for (const [id, value] of inner) {
    const n = node.subgraph.nodes.find(n => String(n.id) === String(id));
    n.widgets[0].value = value;
  }
  node.setDirtyCanvas(true, true);
  return node.widgets.map(w => [w.name, w.value]);
}"""

PLAYING = """() => [...document.querySelectorAll('video')].some(
  v => v.src.includes('/view?') && v.src.includes('.mp4') && v.readyState >= 2 && v.videoWidth > 0)"""


def test_wan22_i2v_template_from_the_dialog_runs_and_previews_its_video(serve, tmp_path, demo_workspace):
    from playwright.sync_api import sync_playwright

    sample_png = (demo_workspace.root / "input" / "example.png").read_bytes()
    base = serve("--user-directory", str(tmp_path / "fresh_user"))  # a first-time user: the dialog opens
    host = urlparse(base).netloc
    failed: list[str] = []
    errors: list[str] = []

    def ours(url: str) -> bool:
        return urlparse(url).netloc == host

    with sync_playwright() as p:
        browser = launch(p, "--autoplay-policy=no-user-gesture-required")
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.route(
            re.compile(r"https://raw\.githubusercontent\.com/Comfy-Org/workflow_templates/.*/input/.*"),
            lambda route: route.fulfill(status=200, content_type="image/png", body=sample_png),
        )
        page.on(
            "response",
            lambda r: (
                failed.append(f"{r.status} {r.request.method} {r.url}") if ours(r.url) and r.status >= 400 else None
            ),
        )
        page.on(
            "requestfailed",
            lambda r: (
                failed.append(f"{r.failure} {r.url}")
                if ours(r.url) and "ERR_ABORTED" not in (r.failure or "")
                else None
            ),
        )

        def on_console(msg):
            where = msg.location.get("url", "") if msg.location else ""
            if msg.type == "error" and (not where or ours(where)) and "ERR_NAME_NOT_RESOLVED" not in msg.text:
                errors.append(msg.text)

        page.on("console", on_console)
        page.on("pageerror", lambda exc: errors.append(f"pageerror: {exc}"))
        page.goto(base + "/")
        wait_for_app(page, 90_000)
        page.locator("[data-testid^='template-workflow-']").first.wait_for(timeout=30_000)  # opened by itself
        page.locator("[role=dialog] input").first.fill(TEMPLATE)
        page.wait_for_timeout(1_000)  # the search box applies its query after a 400 ms pause
        page.locator(f"[data-testid='template-workflow-{TEMPLATE}']").click(timeout=20_000)
        page.wait_for_function(
            """(name) => window.app.extensionManager.workflow.activeWorkflow?.filename === name
                         && window.app.rootGraph.nodes.some(n => n.subgraph)""",
            arg=TEMPLATE,
            timeout=30_000,
        )
        page.wait_for_load_state("networkidle", timeout=30_000)
        widgets = dict(page.evaluate(SET_WIDGETS, [SUBSTITUTE, [[k[0], v] for k, v in INNER.items()]]))
        # fit the whole graph in view (nothing selected), so the Save Video node is drawn
        page.evaluate("() => { window.app.canvas.deselectAll(); }")
        page.evaluate("() => window.app.extensionManager.command.execute('Comfy.Canvas.FitView')")
        with page.expect_response(lambda r: "/view?" in r.url and ".mp4" in r.url, timeout=120_000) as view:
            page.get_by_role("button", name="Run", exact=True).first.click()
        response = view.value
        page.wait_for_function(PLAYING, timeout=30_000)
        shown = page.evaluate("""() => { const v = [...document.querySelectorAll('video')].find(
                                   v => v.src.includes('.mp4'));
                                 return {src: v.src, width: v.videoWidth, height: v.videoHeight,
                                         ready: v.readyState, duration: v.duration} }""")
        uploaded = page.evaluate("() => window.app.rootGraph.nodes.find(n => n.type === 'LoadImage').widgets[0].value")
        page.screenshot(path=str(tmp_path / "webui_wan_template.png"))
        browser.close()

    assert widgets["unet_name"] == SUBSTITUTE["unet_name"] and widgets["vae_name"] == SUBSTITUTE["vae_name"]
    # the video element asks for byte ranges, which /view answers (206) as ComfyUI's aiohttp FileResponse does
    assert response.status in (200, 206) and response.headers["content-type"] == "video/mp4"
    query = parse_qs(urlparse(shown["src"]).query)
    assert ours(shown["src"]) and urlparse(shown["src"]).path.endswith("/view")
    assert query["filename"][0].startswith("Wan2.2_i2v_") and query["filename"][0].endswith(".mp4")
    assert query["subfolder"] == ["video"] and query["type"] == ["output"]
    assert (demo_workspace.output_dir / "video" / query["filename"][0]).is_file()
    assert (shown["width"], shown["height"]) == (64, 64) and shown["ready"] >= 2  # a frame is decoded
    assert abs(shown["duration"] - 5 / 16) < 0.05, shown  # 5 frames at 16 fps
    assert uploaded.startswith("video_wan2_2_14B_i2v_input_image"), uploaded  # the sample went through /upload
    assert failed == [], failed
    assert errors == [], errors
