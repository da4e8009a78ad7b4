"""What every web UI test shares: Debian's Chromium driven by Playwright (never a downloaded browser), the
skip when it is absent, a returning user's settings, and the wait for the app to finish loading."""

from __future__ import annotations

import os
import shutil
import urllib.request
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

requires_chromium = pytest.mark.skipif(
    not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed (.ci/run installs it)"
)

APP_LOADED = "window.app && window.app.graph && !document.querySelector('#splash-loader')"


def launch(playwright: Any, *extra_args: str) -> Any:
    return playwright.chromium.launch(executable_path=CHROMIUM, args=[*CHROMIUM_ARGS, *extra_args])


def as_returning_user(base: str) -> str:
    """A returning user gets a graph instead of the first-run templates dialog."""
    req = urllib.request.Request(base + "/api/settings/Comfy.TutorialCompleted", data=b"true", method="POST")
    urllib.request.urlopen(req).read()
    return base


def wait_for_app(page: Any, timeout_ms: int = 90_000) -> None:
    page.wait_for_function(APP_LOADED, timeout=timeout_ms)
