"""GET /global_subgraphs and /global_subgraphs/{id}: the subgraph blueprints custom node packs ship in
their `subgraphs/` folder, which the web UI adds to its node library at every start.

The list is {id: {"source", "name", "info": {"node_pack"}}} without the workflow text; the UI then asks
/global_subgraphs/{id} for each, which answers the same entry with "data", the blueprint file's text.
No pack with blueprints gives {}."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

from aiohttp import web

from .custom_node_files import custom_node_packs

if TYPE_CHECKING:
    from .app import PromptServer

FOLDER = "subgraphs"


def blueprints(server: PromptServer) -> dict[str, tuple[dict, Path]]:
    """id -> (listing entry, file) for every subgraphs/*.json of every enabled custom node pack."""
    found: dict[str, tuple[dict, Path]] = {}
    for pack in custom_node_packs(server.workspace):
        folder = pack / FOLDER
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.json")):
            # A stable id that is one URL segment whatever the pack and file are called.
            key = hashlib.sha256(f"{pack.name}/{path.name}".encode()).hexdigest()[:32]
            found[key] = ({"source": "custom_node", "name": path.stem, "info": {"node_pack": pack.name}}, path)
    return found


def add_routes(routes: web.RouteTableDef, server: PromptServer) -> None:
    @routes.get("/global_subgraphs")
    async def list_subgraphs(request: web.Request) -> web.Response:
        return web.json_response({key: entry for key, (entry, _) in blueprints(server).items()})

    @routes.get("/global_subgraphs/{id}")
    async def get_subgraph(request: web.Request) -> web.Response:
        found = blueprints(server).get(request.match_info["id"])
        if found is None:
            return web.json_response({"error": "Subgraph not found"}, status=404)
        entry, path = found
        try:
            data = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return web.json_response({"error": "Subgraph not readable"}, status=404)
        return web.json_response({**entry, "data": data})
