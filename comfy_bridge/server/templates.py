"""GET /templates/...: the core workflow templates of the comfyui-workflow-templates packages, which the
web UI's Templates dialog reads (index.json, index.<locale>.json, index_logo.json, fuse_options.json,
<template>.json and the thumbnails <template>-1.webp, ...). Not under /api, like ComfyUI.

Two layouts are published on PyPI:
- before 0.3.0, one package whose `comfyui_workflow_templates/templates/` folder holds every file:
  served as a static folder, as ComfyUI 0.3.64 does;
- since, a meta package over split ones: `comfyui_workflow_templates_core` (a manifest of templates and
  their assets), `comfyui_workflow_templates_json` (the index files and every workflow) and media bundles
  (`comfyui_workflow_templates_media_*`, the thumbnails, about 500 MB). Each file is served by name from
  the package that holds it; an asset whose media bundle is not installed is a 404.

Our required dependencies are the core and json packages (the dialog lists and opens every template);
the `templates` extra adds the meta package with its media bundles (the thumbnails)."""

from __future__ import annotations

import importlib
import logging
import mimetypes
from functools import lru_cache
from pathlib import Path

from aiohttp import web

log = logging.getLogger(__name__)

# The packages' kinds of file; explicit, since a platform's mime table may lack image/webp.
CONTENT_TYPES = {
    ".json": "application/json",
    ".webp": "image/webp",
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".svg": "image/svg+xml",
    ".mp3": "audio/mpeg",
    ".mp4": "video/mp4",
    ".webm": "video/webm",
}
JSON_PACKAGE = "comfyui_workflow_templates_json"
CORE_PACKAGE = "comfyui_workflow_templates_core"
LEGACY_PACKAGE = "comfyui_workflow_templates"


def _templates_folder(module: str) -> Path | None:
    try:
        mod = importlib.import_module(module)
    except ImportError:
        return None
    files = getattr(mod, "__file__", None)
    roots = [Path(files).parent] if files else [Path(p) for p in getattr(mod, "__path__", [])]
    for root in roots:
        if (root / "templates").is_dir():
            return root / "templates"
    return None


def legacy_folder() -> Path | None:
    """The single-package layout's folder (comfyui-workflow-templates < 0.3.0), if that is installed."""
    return _templates_folder(LEGACY_PACKAGE)


@lru_cache(maxsize=1)
def asset_files() -> dict[str, Path]:
    """File name -> path for the split layout: every file of the json package (index files and
    workflows) and every manifest asset whose package is installed. Empty when neither is installed."""
    files: dict[str, Path] = {}
    json_folder = _templates_folder(JSON_PACKAGE)
    if json_folder is not None:
        files.update((p.name, p) for p in json_folder.iterdir() if p.is_file())
    try:
        core = importlib.import_module(CORE_PACKAGE)
    except ImportError:
        return files
    missing = 0
    for entry in core.iter_templates():
        for asset in entry.assets:
            if asset.filename in files:
                continue
            try:
                files[asset.filename] = Path(core.get_asset_path(entry.template_id, asset.filename))
            except (FileNotFoundError, KeyError):
                missing += 1
    if missing:
        log.info(
            "workflow templates: %d media files are not installed (pip install 'comfy-cluster[templates]' "
            "adds the thumbnails)",
            missing,
        )
    return files


def add_static_routes(app: web.Application) -> None:
    """Registered before the web root's catch-all static route."""
    legacy = legacy_folder()
    if legacy is not None:
        app.add_routes([web.static("/templates", legacy)])
        return

    async def get_template_file(request: web.Request) -> web.StreamResponse:
        # A lookup among the packages' own file names (some in a folder: "logo/bfl.png"), never a path join.
        path = asset_files().get(request.match_info["name"])
        if path is None or not path.is_file():
            return web.Response(status=404)
        content_type = CONTENT_TYPES.get(path.suffix.lower()) or mimetypes.guess_type(path.name)[0]
        return web.FileResponse(path, headers={"Content-Type": content_type or "application/octet-stream"})

    app.router.add_get("/templates/{name:.*}", get_template_file)
