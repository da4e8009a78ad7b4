"""The isolation cases of Comfy API v2 (/api/v2/*), merged into isolation_cases.CASES: the attacker
names the victim's v2 job, its uploaded asset, its output and the hash of its bytes, and gets nothing;
the victim asking the same gets its own (positive controls)."""

from __future__ import annotations

import json

import aiohttp
import tenant_nodes as tn
from isolation_cases import Ctx, assert_not_interrupted, attack, own, public, tenant


def v2_form(file_path: str, data: bytes) -> aiohttp.FormData:
    form = aiohttp.FormData()
    form.add_field("file_path", file_path)
    form.add_field("content_type", "image/png")
    form.add_field("file", data, filename="upload.png", content_type="image/png")
    return form


@tenant
async def post_v2_jobs(ctx: Ctx) -> None:
    """The victim's assets and outputs cannot be named in a workflow; its idempotency key is not ours."""
    v = ctx.victim
    for asset_id in (v.v2_asset, v.v2_output):
        ref = {"__type": "core/ASSET", "info": {"id": asset_id}}
        _, body = await attack(
            ctx,
            "POST",
            "/api/v2/jobs",
            expect=(422,),
            json_body={"workflow": {"1": {"class_type": "TCopyInput", "inputs": {"image": ref, "prefix": "stolen"}}}},
        )
        assert json.loads(body)["error"]["code"] == "missing_asset"
    await attack(
        ctx,
        "POST",
        "/api/v2/jobs",
        expect=(201,),
        headers={"Idempotency-Key": f"{v.name}-key"},
        json_body={"workflow": tn.prompt(31, prefix=f"{ctx.attacker.name}v2")},
    )


@tenant
async def get_v2_jobs(ctx: Ctx) -> None:
    """The job list holds only the caller's jobs."""
    _, body = await attack(ctx, "GET", "/api/v2/jobs", expect=(200,))
    assert ctx.attacker.v2_job in body.decode()
    await own(ctx, "GET", "/api/v2/jobs", [ctx.victim.v2_job])


@tenant
async def get_v2_job(ctx: Ctx) -> None:
    """The victim's job ids (v2 and v1 prompts) read as not found."""
    v = ctx.victim
    for job_id in (v.v2_job, v.done, v.running, v.pending):
        await attack(ctx, "GET", f"/api/v2/jobs/{job_id}", expect=(404,))
    await own(ctx, "GET", f"/api/v2/jobs/{v.v2_job}", [v.v2_job, v.v2_output, "succeeded"])


@tenant
async def get_v2_job_workflow(ctx: Ctx) -> None:
    """The victim's workflows read as not found."""
    for job_id in (ctx.victim.v2_job, ctx.victim.running):
        await attack(ctx, "GET", f"/api/v2/jobs/{job_id}/workflow", expect=(404,))
    await own(ctx, "GET", f"/api/v2/jobs/{ctx.victim.v2_job}/workflow", [f"{ctx.victim.name}img2"])


@tenant
async def get_v2_job_events(ctx: Ctx) -> None:
    """The victim's event streams read as not found."""
    for job_id in (ctx.victim.v2_job, ctx.victim.running):
        await attack(ctx, "GET", f"/api/v2/jobs/{job_id}/events", expect=(404,))
    await own(
        ctx, "GET", f"/api/v2/jobs/{ctx.victim.v2_job}/events", ["event: status", "succeeded", ctx.victim.v2_output]
    )


@tenant
async def cancel_v2_job(ctx: Ctx) -> None:
    """Cancelling the victim's jobs cancels nothing and interrupts nothing."""
    v = ctx.victim
    for job_id in (v.v2_job, v.running, v.pending):
        await attack(ctx, "POST", f"/api/v2/jobs/{job_id}/cancel", expect=(404,))
    assert_not_interrupted(ctx)
    await own(ctx, "GET", f"/api/v2/jobs/{v.v2_job}", ["succeeded"])


@tenant
async def post_v2_assets(ctx: Ctx) -> None:
    """The victim's bytes uploaded again are new to the caller (no dedup across tenants), land in the
    caller's folder, and no file_path reaches the victim's folder."""
    v = ctx.victim.name
    name = f"{v}input2.png"
    victim_file = ctx.workspace.input_dir / "tenants" / v / name
    original = victim_file.read_bytes()
    _, body = await attack(ctx, "POST", "/api/v2/assets", data=v2_form(name, original), expect=(201,), sent=name)
    assert json.loads(body)["created_new"] is True
    for path in (f"../{v}/{name}", f"../../input/tenants/{v}/x.png", f"/tmp/{name}"):
        await attack(ctx, "POST", "/api/v2/assets", data=v2_form(path, b"X"), expect=(422,), sent=path)
    assert victim_file.read_bytes() == original
    # The victim's own model is the victim's: listed and read for it only (the attacker's reads of the
    # model routes are the public cases, which find none of it).
    await own(ctx, "GET", "/models/checkpoints", [f"{v}model2.safetensors"])
    await own(ctx, "GET", f"/view_metadata/checkpoints?filename={v}model2.safetensors", [f"{ctx.victim.upper}-META"])


@tenant
async def post_v2_from_hash(ctx: Ctx) -> None:
    """The hash of the victim's output mints nothing for the caller."""
    _, body = await attack(
        ctx, "POST", "/api/v2/assets/from-hash", json_body={"hash": ctx.victim.v2_hash}, expect=(404,)
    )
    assert json.loads(body)["error"]["code"] == "blob_not_found"


@tenant
async def head_v2_by_hash(ctx: Ctx) -> None:
    """The victim's bytes do not exist for the caller."""
    await attack(ctx, "HEAD", f"/api/v2/assets/by-hash/{ctx.victim.v2_hash}", expect=(404,))
    await own(ctx, "HEAD", f"/api/v2/assets/by-hash/{ctx.victim.v2_hash}", [])


@tenant
async def get_v2_asset(ctx: Ctx) -> None:
    """The victim's assets and outputs read as not found."""
    v = ctx.victim
    for asset_id in (v.v2_asset, v.v2_output):
        await attack(ctx, "GET", f"/api/v2/assets/{asset_id}", expect=(404,))
    await own(ctx, "GET", f"/api/v2/assets/{v.v2_asset}", [v.v2_asset])


@tenant
async def get_v2_asset_content(ctx: Ctx) -> None:
    """The victim's bytes are not served to the caller."""
    v = ctx.victim
    for asset_id in (v.v2_asset, v.v2_output):
        await attack(ctx, "GET", f"/api/v2/assets/{asset_id}/content", expect=(404,))
    await own(ctx, "GET", f"/api/v2/assets/{v.v2_asset}/content", [f"{v.upper}-PNGTEXT"])


@tenant
async def delete_v2_asset(ctx: Ctx) -> None:
    """Deleting the victim's assets deletes nothing."""
    v = ctx.victim
    for asset_id in (v.v2_asset, v.v2_output):
        await attack(ctx, "DELETE", f"/api/v2/assets/{asset_id}", expect=(404,))
    await own(ctx, "GET", f"/api/v2/assets/{v.v2_asset}/content", [f"{v.upper}-PNGTEXT"])


V2_CASES = {
    ("GET", "/api/v2/health"): public("the server's health", "/api/v2/health"),
    ("POST", "/api/v2/jobs"): post_v2_jobs,
    ("GET", "/api/v2/jobs"): get_v2_jobs,
    ("GET", "/api/v2/jobs/{id}"): get_v2_job,
    ("GET", "/api/v2/jobs/{id}/workflow"): get_v2_job_workflow,
    ("GET", "/api/v2/jobs/{id}/events"): get_v2_job_events,
    ("POST", "/api/v2/jobs/{id}/cancel"): cancel_v2_job,
    ("POST", "/api/v2/assets"): post_v2_assets,
    ("POST", "/api/v2/assets/from-hash"): post_v2_from_hash,
    ("HEAD", "/api/v2/assets/by-hash/{hash}"): head_v2_by_hash,
    ("GET", "/api/v2/assets/{id}"): get_v2_asset,
    ("GET", "/api/v2/assets/{id}/content"): get_v2_asset_content,
    ("DELETE", "/api/v2/assets/{id}"): delete_v2_asset,
}
