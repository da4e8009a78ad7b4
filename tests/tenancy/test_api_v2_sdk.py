"""The official Comfy API v2 client (comfy-sdk, pinned in the test extras) against our hosted server,
with a tenant's key: submit, poll, stream events, cancel one job, download outputs (whole and by
range), upload an asset and reuse it (deduplicated by blake3), and a second tenant that reaches none
of the first one's jobs, assets, outputs or events."""

from __future__ import annotations

import io
import os

import pytest
from comfy_low import errors as low_errors
from comfy_sdk import AsyncComfy, MissingAsset, NotFound
from comfy_sdk.events import OutputReady, Preview, Progress, StatusChange
from PIL import Image


def png_bytes(color: tuple[int, int, int]) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (3, 2), color).save(buf, format="PNG")
    return buf.getvalue()


# Set to a Comfy API v2 server of the reference (comfy-api-proxy in front of real ComfyUI with
# tests/tenancy/reference/v2_reference_nodes.py; scripts/api_v2_reference.py starts both) to run these
# tests against it instead of our server: the same tests, one tenant (the proxy has no keys).
REFERENCE = os.environ.get("COMFY_V2_REFERENCE_URL")


@pytest.fixture
async def sdk(hosted, monkeypatch):
    """A factory of AsyncComfy clients aimed at the server under test, one per tenant key."""
    monkeypatch.setenv("COMFY_BASE_URL", REFERENCE or str(hosted.client.make_url("")).rstrip("/"))
    monkeypatch.delenv("COMFY_API_KEY", raising=False)
    clients: dict[str, AsyncComfy] = {}

    def make(tenant: str) -> AsyncComfy:
        if REFERENCE:
            if clients and tenant not in clients:
                pytest.skip("the reference (comfy-api-proxy) is single-user: no tenant keys")
            clients[tenant] = AsyncComfy()
        else:
            if tenant not in hosted.keys:
                hosted.add(tenant)
            clients[tenant] = AsyncComfy(api_key=hosted.keys[tenant])
        return clients[tenant]

    yield make
    for client in clients.values():
        await client.aclose()


def step_workflow(value: int, steps: int = 5, prefix: str = "steps") -> dict:
    return {
        "1": {"class_type": "TNumber", "inputs": {"value": value}},
        "2": {
            "class_type": "TStepSave",
            "inputs": {"value": ["1", 0], "prefix": prefix, "steps": steps, "seconds": 0.05},
        },
    }


async def test_submit_stream_and_download_outputs(sdk):
    client = sdk("alice")
    job = await client.submit(client.workflows.from_json(step_workflow(42)))
    assert job.status in ("queued", "running")  # the worker may take it before the answer is written
    events = [event async for event in job.events()]
    statuses = [e.status for e in events if isinstance(e, StatusChange)]
    assert statuses[-1] == "succeeded" and "running" in statuses, statuses
    steps = [(e.step, e.steps) for e in events if isinstance(e, Progress) and e.steps]
    assert steps and steps == sorted(steps) and {total for _, total in steps} == {5}, steps
    if not REFERENCE:  # the contract allows throttled snapshots; ours sends one per step, in order
        assert steps == [(i, 5) for i in range(1, 6)], steps
    values = [e.value for e in events if isinstance(e, Progress)]
    assert values == sorted(values) and values[-1] > 0.5
    streamed = [e.output for e in events if isinstance(e, OutputReady)]
    assert [o.name for o in streamed] == ["steps_42.png"]

    done = await (await client.jobs.get(job.id)).result()  # poll: authoritative
    (output,) = done.get_outputs("2")
    assert output.type == "image" and output.content_type == "image/png" and output.job_id == job.id
    data = await output.to_bytes()
    with Image.open(io.BytesIO(data)) as img:
        assert img.getpixel((0, 0)) == (42, 7, 9)
    buf = io.BytesIO()
    await output.to_stream(buf, range=(0, 7))
    assert buf.getvalue() == data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) == output.size_bytes


async def test_previews_stream_as_jpeg(sdk):
    client = sdk("alice")
    workflow = step_workflow(5, steps=3)
    workflow["2"]["inputs"]["preview"] = True
    job = await client.submit(client.workflows.from_json(workflow))
    previews = [e async for e in job.events() if isinstance(e, Preview)]
    assert previews and {p.content_type for p in previews} == {"image/jpeg"} and {p.node_id for p in previews} == {"2"}
    with Image.open(io.BytesIO(previews[-1].data)) as img:
        red, green, _ = img.convert("RGB").getpixel((4, 4))
    assert abs(green - 200) < 8 and red in range(0, 90)  # one of the steps' previews, JPEG-rounded
    if not REFERENCE:  # the contract allows throttling previews; ours sends every one
        assert len(previews) == 3 and abs(red - 80) < 8


async def test_upload_asset_and_reuse_it(sdk):
    client = sdk("alice")
    picture = png_bytes((200, 100, 50))
    asset = client.assets.from_bytes(picture, filename="photo.png", content_type="image/png")
    wf = client.workflows.from_json({"1": {"class_type": "TCopyInput", "inputs": {"image": None, "prefix": "c1"}}})
    wf.set_input("1", "image", asset)
    job = await (await client.submit(wf)).result()
    assert asset.created_new is True and asset.hash.startswith("blake3:")
    assert await job.outputs[0].to_bytes() == picture  # the reference resolved to the uploaded file

    again = client.assets.from_bytes(picture, filename="same.png", content_type="image/png")
    wf2 = client.workflows.from_json({"1": {"class_type": "TCopyInput", "inputs": {"image": None, "prefix": "c2"}}})
    wf2.set_input("1", "image", again)
    job2 = await (await client.submit(wf2)).result()
    assert again.created_new is False and again.hash == asset.hash  # deduplicated: no second upload
    assert await job2.outputs[0].to_bytes() == picture
    fetched = await client.assets.get(asset.id)
    assert fetched.hash == asset.hash


async def test_cancel_reaches_only_that_job(sdk):
    client = sdk("alice")
    slow = {
        "1": {"class_type": "TNumber", "inputs": {"value": 1}},
        "2": {"class_type": "TSlowSave", "inputs": {"value": ["1", 0], "prefix": "slow", "seconds": 30.0}},
    }
    running = await client.submit(client.workflows.from_json(slow))
    queued = await client.submit(client.workflows.from_json(step_workflow(3, steps=2, prefix="after")))
    async for event in running.events():
        if isinstance(event, StatusChange) and event.status == "running":
            break
    await queued.cancel()
    assert queued.status == "canceled"
    await running.refresh()
    assert running.status == "running"  # cancelling the queued job left the running one alone
    await running.cancel()
    assert running.status in ("canceling", "canceled")
    await running.wait(timeout=20)
    assert running.status == "canceled"
    third = await (await client.submit(client.workflows.from_json(step_workflow(4, steps=2)))).result()
    assert third.status == "succeeded"
    await queued.refresh()
    assert queued.status == "canceled" and queued.outputs == []


async def test_second_tenant_sees_none_of_the_first(sdk):
    alice, bob = sdk("alice"), sdk("bob")  # (skipped against the single-user reference)
    asset = alice.assets.from_bytes(png_bytes((1, 2, 3)), filename="mine.png", content_type="image/png")
    wf = alice.workflows.from_json({"1": {"class_type": "TCopyInput", "inputs": {"image": None, "prefix": "x"}}})
    wf.set_input("1", "image", asset)
    job = await (await alice.submit(wf)).result()
    output = job.outputs[0]

    assert [s async for s in bob.list_jobs()] == []
    assert [s.id async for s in alice.list_jobs()] == [job.id]
    with pytest.raises(NotFound):
        await bob.jobs.get(job.id)
    with pytest.raises(NotFound):
        await bob.assets.get(asset.id)
    with pytest.raises(NotFound):
        await bob.assets.get(output.id)
    with pytest.raises(low_errors.NotFound):  # the transport's calls (no SDK wrapper takes an id)
        await bob._low.cancel_job(job.id)
    with pytest.raises(low_errors.NotFound):
        [e async for e in bob._low.get_job_events(job.id)]
    with pytest.raises(low_errors.NotFound):
        async with bob._low.get_asset_content(output.id):
            pass
    assert await bob._low.head_asset_by_hash(asset.hash) is False
    # Bob naming Alice's asset in his own workflow gets missing_asset, not her file.
    stolen = bob.workflows.from_json(
        {
            "1": {
                "class_type": "TCopyInput",
                "inputs": {"image": {"__type": "core/ASSET", "info": {"id": asset.id}}, "prefix": "y"},
            }
        }
    )
    with pytest.raises(MissingAsset):
        await bob.submit(stolen)
