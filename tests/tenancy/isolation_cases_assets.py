"""The isolation cases of the local assets API (/api/assets, /api/tags), merged into isolation_cases.CASES:
the attacker names the victim's asset ids, the hash of its uploaded bytes and its tags, lists, refines
and seeds, and gets nothing of the victim's; the victim asking the same gets its own (positive controls).
The victim's records are its input files (`<v>input.png`, `<v>model.safetensors`), its outputs and two
uploads (fill_assets) tagged `<v>input-tag` (a secret: every answer to the attacker is searched for it)."""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any

import aiohttp
from isolation_cases import Ctx, attack, call, own, tenant
from PIL import Image

_made: dict[tuple, dict] = {}  # (server, victim) -> its upload through the assets API (made once per world)


def _upload_form(data: bytes, *tags: str) -> aiohttp.FormData:
    form = aiohttp.FormData()
    form.add_field("file", data, filename="upload.png", content_type="image/png")
    for tag in tags:
        form.add_field("tags", tag)
    return form


def _bytes(name: str) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (3, 3), (len(name), 7, 7)).save(buf, format="PNG")
    return buf.getvalue()


async def fill_assets(client: Any, server: Any, t: Any) -> None:
    """The tenant's uploads through the assets API, made with its other data (before the snapshot of it
    that must not change): one whose bytes the attacker uploads too (post_assets), one it never does."""
    for private in (False, True):
        resp = await client.post(
            "/api/assets",
            headers=t.headers,
            data=_upload_form(_bytes(t.name + "private" * private), "input", f"{t.name}input-tag"),
        )
        assert resp.status == 201, await resp.text()
        _made[(id(server), t.name, private)] = await resp.json()


async def victim_asset(ctx: Ctx, private: bool = False) -> dict:
    return _made[(id(ctx.server), ctx.victim.name, private)]


@tenant
async def get_assets(ctx: Ctx) -> None:
    """The listing is the caller's own, whatever filter names the victim's files or tags."""
    v = ctx.victim.name
    await victim_asset(ctx)
    for query in (
        "",
        "?limit=500",
        f"?name_contains={v}",
        f"?include_tags={v}input-tag",
        "?include_tags=models",
        "?tags_any=input,output",
        "?include_public=true",
    ):
        _, body = await attack(ctx, "GET", "/assets" + query, expect=(200,))
        assert f"{v}input".encode() not in body
    await own(
        ctx, "GET", "/assets?limit=500", [f"{v}input.png", f"{v}model.safetensors", f"{v}input-tag", ctx.victim.image]
    )


@tenant
async def get_asset(ctx: Ctx) -> None:
    """The victim's asset ids read as not found."""
    asset = await victim_asset(ctx)
    await attack(ctx, "GET", f"/assets/{asset['id']}", expect=(404,))
    await own(ctx, "GET", f"/assets/{asset['id']}", [f"{ctx.victim.name}input-tag"])


@tenant
async def get_asset_content(ctx: Ctx) -> None:
    """The victim's bytes are not served by its asset id."""
    asset = await victim_asset(ctx)
    await attack(ctx, "GET", f"/assets/{asset['id']}/content", expect=(404,))
    body = await own(ctx, "GET", f"/assets/{asset['id']}/content", [])
    assert body == _bytes(ctx.victim.name)
    # Models: the caller's own model file may be downloaded, the operator's shared ones may not.
    _, listing = await attack(ctx, "GET", "/assets?include_tags=models&limit=500", expect=(200,))
    models = {a["name"]: a["id"] for a in json.loads(listing)["assets"]}
    await attack(ctx, "GET", f"/assets/{models['shared.safetensors']}/content", expect=(403,))
    await attack(ctx, "GET", f"/assets/{models[ctx.attacker.name + 'model2.safetensors']}/content", expect=(200,))


@tenant
async def head_asset_hash(ctx: Ctx) -> None:
    """Whether the victim holds some bytes is not told."""
    asset = await victim_asset(ctx, private=True)
    await attack(ctx, "HEAD", f"/assets/hash/{asset['hash']}", expect=(404,))
    status, _ = await call(ctx, ctx.victim, "HEAD", ctx.url(f"/assets/hash/{asset['hash']}"))
    assert status == 200


@tenant
async def post_from_hash(ctx: Ctx) -> None:
    """The victim's bytes cannot be claimed by their hash."""
    asset = await victim_asset(ctx, private=True)
    await attack(ctx, "POST", "/assets/from-hash", json_body={"hash": asset["hash"]}, expect=(404,))


@tenant
async def post_assets(ctx: Ctx) -> None:
    """Uploading the victim's bytes makes new content in the caller's own folder, neither finding nor
    touching the victim's file."""
    v = ctx.victim.name
    asset = await victim_asset(ctx)
    victim_file = ctx.workspace.input_dir / "tenants" / v / asset["loader_path"]
    status, body = await attack(ctx, "POST", "/assets", data=_upload_form(_bytes(v), "input"), expect=(200, 201))
    assert json.loads(body)["created_new"] is (status == 201)  # 200: the caller's own upload of the last round
    attacker_file = ctx.workspace.input_dir / "tenants" / ctx.attacker.name / asset["loader_path"]
    assert attacker_file.read_bytes() == victim_file.read_bytes() == _bytes(v)
    # Models go to the caller's own model folder only.
    await attack(ctx, "POST", "/assets", data=_upload_form(b"x", "models", "model_type:checkpoints"), expect=(400,))


@tenant
async def put_asset(ctx: Ctx) -> None:
    """The victim's records cannot be renamed or given a preview; nor can the caller's take the victim's."""
    asset = await victim_asset(ctx)
    await attack(ctx, "PUT", f"/assets/{asset['id']}", json_body={"name": "stolen"}, expect=(404,))
    _, body = await call(
        ctx, ctx.attacker, "POST", ctx.url("/assets"), data=_upload_form(_bytes(ctx.attacker.name + "p"), "input")
    )
    mine = json.loads(body)["id"]
    await attack(ctx, "PUT", f"/assets/{mine}", json_body={"preview_id": asset["id"]}, expect=(400,))
    await own(ctx, "GET", f"/assets/{asset['id']}", [asset["name"]])


@tenant
async def delete_asset(ctx: Ctx) -> None:
    """The victim's records cannot be deleted."""
    asset = await victim_asset(ctx)
    await attack(ctx, "DELETE", f"/assets/{asset['id']}", expect=(404,))
    await own(ctx, "GET", f"/assets/{asset['id']}", [asset["id"]])


@tenant
async def post_asset_tags(ctx: Ctx) -> None:
    """The victim's records cannot be tagged."""
    asset = await victim_asset(ctx)
    await attack(ctx, "POST", f"/assets/{asset['id']}/tags", json_body={"tags": ["stolen"]}, expect=(404,))
    body = await own(ctx, "GET", f"/assets/{asset['id']}", [])
    assert b"stolen" not in body


@tenant
async def delete_asset_tags(ctx: Ctx) -> None:
    """The victim's tags cannot be removed."""
    asset = await victim_asset(ctx)
    tag = f"{ctx.victim.name}input-tag"
    await attack(ctx, "DELETE", f"/assets/{asset['id']}/tags", json_body={"tags": [tag]}, expect=(404,), sent=tag)
    await own(ctx, "GET", f"/assets/{asset['id']}", [tag])


@tenant
async def get_tags(ctx: Ctx) -> None:
    """Tag counts are the caller's own."""
    await victim_asset(ctx)
    v = ctx.victim.name
    await attack(ctx, "GET", f"/tags?prefix={v}", expect=(200,))
    await attack(ctx, "GET", "/tags?limit=1000", expect=(200,))
    await own(ctx, "GET", "/tags?limit=1000", [f"{v}input-tag"])


@tenant
async def get_tags_refine(ctx: Ctx) -> None:
    """The tag histogram is over the caller's own records."""
    await victim_asset(ctx)
    v = ctx.victim.name
    await attack(ctx, "GET", f"/assets/tags/refine?include_tags={v}input-tag", expect=(200,))
    await attack(ctx, "GET", "/assets/tags/refine?limit=1000", expect=(200,))
    await own(ctx, "GET", "/assets/tags/refine?limit=1000", [f"{v}input-tag"])


@tenant
async def post_seed(ctx: Ctx) -> None:
    """A seed scans the caller's own folders (the records it makes are the caller's)."""
    async with asyncio.timeout(30):  # the background seed of the other prefix's round ends first
        while json.loads((await attack(ctx, "GET", "/assets/seed/status", head=False))[1])["state"] != "IDLE":
            await asyncio.sleep(0.02)
    await attack(
        ctx, "POST", "/assets/seed?wait=true", json_body={"roots": ["input", "output", "models"]}, expect=(200,)
    )
    await attack(ctx, "POST", "/assets/seed", json_body={}, expect=(202, 409))


@tenant
async def get_seed_status(ctx: Ctx) -> None:
    """The seed status is of the caller's own seeds."""
    await attack(ctx, "GET", "/assets/seed/status", expect=(200,))


@tenant
async def post_prune(ctx: Ctx) -> None:
    """A prune marks only the caller's records; the victim's stay present."""
    asset = await victim_asset(ctx)
    await attack(ctx, "POST", "/assets/prune", expect=(200,))
    body = await own(ctx, "GET", f"/assets/{asset['id']}", [])
    assert b'"missing"' not in body


ASSET_CASES = {
    ("GET", "/assets"): get_assets,
    ("POST", "/assets"): post_assets,
    ("HEAD", "/assets/hash/{hash}"): head_asset_hash,
    ("GET", "/assets/{id}"): get_asset,
    ("PUT", "/assets/{id}"): put_asset,
    ("DELETE", "/assets/{id}"): delete_asset,
    ("GET", "/assets/{id}/content"): get_asset_content,
    ("POST", "/assets/from-hash"): post_from_hash,
    ("POST", "/assets/{id}/tags"): post_asset_tags,
    ("DELETE", "/assets/{id}/tags"): delete_asset_tags,
    ("GET", "/tags"): get_tags,
    ("GET", "/assets/tags/refine"): get_tags_refine,
    ("POST", "/assets/seed"): post_seed,
    ("GET", "/assets/seed/status"): get_seed_status,
    ("POST", "/assets/prune"): post_prune,
}
