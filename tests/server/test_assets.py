"""The local assets API (/api/assets, /api/tags), as today's ComfyUI answers it (app/assets/api/routes.py) and
as the web UI 1.58.1 reads it (its assetSchema: ids, ISO times without an offset, tags, loader_path for
model widgets, preview_url through /api/view), over the workspace's real folders."""

from __future__ import annotations

import io
import json
import re

import aiohttp
import blake3
import pytest
from PIL import Image

UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
LOCAL_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?$")


def _png(color=(1, 2, 3)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (4, 4), color).save(buf, format="PNG")
    return buf.getvalue()


def _form(data: bytes, filename: str, *tags: str, **fields: str) -> aiohttp.FormData:
    form = aiohttp.FormData()
    form.add_field("file", data, filename=filename, content_type="image/png")
    for tag in tags:
        form.add_field("tags", tag)
    for key, value in fields.items():
        form.add_field(key, value)
    return form


async def _list(client, query: str = "") -> dict:
    r = await client.get("/api/assets" + query)
    assert r.status == 200, await r.text()
    return await r.json()


def _frontend_shape(asset: dict) -> None:
    """What the web UI's zod schema requires of every asset it lists."""
    assert UUID.match(asset["id"]) and isinstance(asset["name"], str)
    assert LOCAL_TIME.match(asset["created_at"]) and LOCAL_TIME.match(asset["updated_at"])
    assert isinstance(asset["tags"], list) and isinstance(asset["size"], int)
    assert None not in asset.values()  # absent, not null (mime_type, hash, preview_id are not nullable there)
    if "hash" in asset:
        assert re.match(r"^blake3:[a-f0-9]{64}$", asset["hash"])


async def test_lists_models_inputs_and_outputs_with_their_tags(client, workspace):
    (workspace.models_dir / "checkpoints" / "sub").mkdir(parents=True, exist_ok=True)
    (workspace.models_dir / "checkpoints" / "sub" / "m.safetensors").write_bytes(b"x" * 10)
    (workspace.models_dir / "loras" / "notes.txt").write_text("not a model")  # not a lora extension
    (workspace.input_dir / "pasted").mkdir()
    (workspace.input_dir / "pasted" / "p.png").write_bytes(_png())
    (workspace.output_dir / "o.png").write_bytes(_png())
    body = await _list(client, "?limit=500")
    by_name = {a["name"]: a for a in body["assets"]}
    assert set(by_name) == {"m.safetensors", "p.png", "o.png"} and body["total"] == 3 and body["has_more"] is False
    for asset in body["assets"]:
        _frontend_shape(asset)
    model = by_name["m.safetensors"]
    assert model["tags"] == ["models", "model_type:checkpoints"] and model["loader_path"] == "sub/m.safetensors"
    assert model["display_name"] == "checkpoints/sub/m.safetensors" and "preview_url" not in model
    assert by_name["p.png"]["tags"] == ["input", "pasted"]
    assert by_name["p.png"]["preview_url"] == "/api/view?type=input&filename=p.png&subfolder=pasted"
    assert by_name["o.png"]["tags"] == ["output"]
    # The web UI's model walk: include_tags=models, exclude_tags=missing.
    models = await _list(client, "?include_tags=models&exclude_tags=missing&limit=500")
    assert [a["name"] for a in models["assets"]] == ["m.safetensors"]
    # Ids are stable from one listing to the next.
    again = {a["name"]: a["id"] for a in (await _list(client))["assets"]}
    assert again["m.safetensors"] == model["id"]


async def test_filters_sort_and_pages(client, workspace):
    for i, name in enumerate(["b.png", "a.png", "c.png"]):
        (workspace.input_dir / name).write_bytes(_png((i, 0, 0)))
    (workspace.output_dir / "out.png").write_bytes(_png())
    names = [a["name"] for a in (await _list(client, "?sort=name&order=asc"))["assets"]]
    assert names == ["a.png", "b.png", "c.png", "out.png"]
    assert [a["name"] for a in (await _list(client, "?tags_any=output,nothing"))["assets"]] == ["out.png"]
    assert [a["name"] for a in (await _list(client, "?tags_none=output&name_contains=B"))["assets"]] == ["b.png"]
    assert (await _list(client, "?tags_all=input,output"))["total"] == 0
    first = await _list(client, "?sort=name&order=asc&limit=3")
    assert [a["name"] for a in first["assets"]] == ["a.png", "b.png", "c.png"] and first["has_more"] is True
    rest = await _list(client, f"?sort=name&order=asc&limit=3&after={first['next_cursor']}")
    assert [a["name"] for a in rest["assets"]] == ["out.png"] and rest["has_more"] is False
    assert "next_cursor" not in rest
    offset = await _list(client, "?sort=name&order=asc&limit=2&offset=2")
    assert [a["name"] for a in offset["assets"]] == ["c.png", "out.png"] and offset["total"] == 4


@pytest.mark.parametrize(
    "query, code",
    [
        ("?limit=0", "INVALID_QUERY"),
        ("?limit=501", "INVALID_QUERY"),
        ("?limit=x", "INVALID_QUERY"),
        ("?offset=-1", "INVALID_QUERY"),
        ("?sort=colour", "INVALID_QUERY"),
        ("?order=up", "INVALID_QUERY"),
        ("?include_tags=a&tags_all=b", "INVALID_TAG_FILTER"),
        ("?tags_all=a&tags_none=a", "INVALID_TAG_FILTER"),
        ("?after=garbage", "INVALID_CURSOR"),
        ("?metadata_filter={}", "UNSUPPORTED_PARAM"),
    ],
)
async def test_bad_list_queries_are_400_naming_the_problem(client, query, code):
    r = await client.get("/api/assets" + query)
    assert r.status == 400
    body = await r.json()
    assert body["error"]["code"] == code and body["error"]["message"]
    if code == "INVALID_QUERY":
        assert body["error"]["details"]["errors"][0]["loc"][0] in query


async def test_a_cursor_for_another_sort_is_refused(client, workspace):
    for name in ("a.png", "b.png"):
        (workspace.input_dir / name).write_bytes(_png())
    cursor = (await _list(client, "?sort=name&limit=1"))["next_cursor"]
    r = await client.get(f"/api/assets?sort=size&limit=1&after={cursor}")
    assert r.status == 400 and (await r.json())["error"]["code"] == "INVALID_CURSOR"


async def test_upload_get_content_update_tags_delete(client, workspace):
    data = _png((9, 9, 9))
    hash_ = "blake3:" + blake3.blake3(data).hexdigest()
    r = await client.post(
        "/api/assets", data=_form(data, "photo.png", "input", "mine", user_metadata='{"k": 1}', name="My photo")
    )
    assert r.status == 201, await r.text()
    asset = await r.json()
    _frontend_shape(asset)
    assert asset["created_new"] is True and asset["hash"] == hash_ and asset["name"] == "My photo"
    assert asset["tags"] == ["input", "mine"] and asset["user_metadata"] == {"k": 1}
    stored = workspace.input_dir / asset["loader_path"]
    assert stored.read_bytes() == data and asset["loader_path"] == hash_.split(":")[1] + ".png"
    aid = asset["id"]
    # The same bytes again: a new record over the existing file, 200 and created_new false.
    again = await client.post("/api/assets", data=_form(data, "other.png", "input"))
    assert again.status == 200 and (await again.json())["created_new"] is False
    assert (await client.head(f"/api/assets/hash/{hash_}")).status == 200
    assert (await client.head("/api/assets/hash/blake3:" + "0" * 64)).status == 404
    assert (await client.head("/api/assets/hash/sha256:abc")).status == 400

    got = await client.get(f"/api/assets/{aid}")
    assert got.status == 200 and (await got.json())["id"] == aid
    content = await client.get(f"/api/assets/{aid}/content")
    assert content.status == 200 and await content.read() == data
    assert content.headers["Content-Disposition"].startswith("attachment")
    inline = await client.get(f"/api/assets/{aid}/content?disposition=inline")
    assert inline.headers["Content-Disposition"].startswith("inline")

    put = await client.put(f"/api/assets/{aid}", json={"name": "Renamed", "user_metadata": {"a": "b"}})
    assert put.status == 200
    assert (await put.json())["name"] == "Renamed" and (await put.json())["user_metadata"] == {"a": "b"}
    add = await (await client.post(f"/api/assets/{aid}/tags", json={"tags": ["x", "mine"]})).json()
    assert add == {"added": ["x"], "already_present": ["mine"], "total_tags": ["input", "mine", "x"]}
    rm = await (await client.delete(f"/api/assets/{aid}/tags", json={"tags": ["x", "input", "zzz"]})).json()
    assert rm == {"removed": ["x"], "not_present": ["zzz"], "protected": ["input"], "total_tags": ["input", "mine"]}
    tags = await (await client.get("/api/tags?order=name_asc")).json()
    assert {"name": "mine", "count": 1} in tags["tags"] and tags["has_more"] is False
    refine = await (await client.get("/api/assets/tags/refine?include_tags=mine")).json()
    assert refine == {"tag_counts": {"input": 1, "mine": 1}}

    assert (await client.delete(f"/api/assets/{aid}")).status == 204
    assert (await client.get(f"/api/assets/{aid}")).status == 404
    assert (await client.delete(f"/api/assets/{aid}")).status == 404
    assert stored.exists()  # the record goes, the file stays (ComfyUI's delete)


async def test_from_hash_makes_a_record_over_known_bytes(client):
    data = _png((5, 5, 5))
    hash_ = "blake3:" + blake3.blake3(data).hexdigest()
    await client.post("/api/assets", data=_form(data, "a.png", "input"))
    r = await client.post("/api/assets/from-hash", json={"hash": hash_, "name": "copy", "tags": ["t"]})
    assert r.status == 201
    body = await r.json()
    assert body["name"] == "copy" and body["created_new"] is False and body["tags"] == ["input", "t"]
    missing = await client.post("/api/assets/from-hash", json={"hash": "blake3:" + "1" * 64})
    assert missing.status == 404 and (await missing.json())["error"]["code"] == "ASSET_NOT_FOUND"


async def test_deleted_record_stays_out_of_lists_until_a_seed(client, workspace):
    (workspace.input_dir / "keep.png").write_bytes(_png())
    aid = (await _list(client))["assets"][0]["id"]
    assert (await client.delete(f"/api/assets/{aid}")).status == 204
    assert (await _list(client))["total"] == 0
    seeded = await client.post("/api/assets/seed?wait=true", json={"roots": ["input"]})
    assert seeded.status == 200 and (await seeded.json())["progress"]["created"] == 1
    assert [a["name"] for a in (await _list(client))["assets"]] == ["keep.png"]
    status = await (await client.get("/api/assets/seed/status")).json()
    assert status["state"] == "IDLE" and status["progress"]["created"] == 1


async def test_a_vanished_file_is_tagged_missing_and_comes_back(client, workspace):
    path = workspace.output_dir / "gone.png"
    path.write_bytes(_png())
    await _list(client)
    path.unlink()
    assert (await _list(client, "?exclude_tags=missing"))["total"] == 0
    assert (await _list(client))["assets"][0]["tags"] == ["output", "missing"]
    assert (await (await client.post("/api/assets/prune")).json()) == {"status": "completed", "marked": 0}
    path.write_bytes(_png())
    assert (await _list(client))["assets"][0]["tags"] == ["output"]


async def test_model_upload_goes_to_its_folder(client, workspace):
    r = await client.post("/api/assets", data=_form(b"weights", "w.safetensors", "models", "model_type:loras"))
    assert r.status == 201, await r.text()
    body = await r.json()
    assert body["tags"] == ["models", "model_type:loras"]
    assert (workspace.models_dir / "loras" / body["loader_path"]).read_bytes() == b"weights"


@pytest.mark.parametrize(
    "tags, filename, message",
    [
        ((), "a.png", "exactly one destination tag"),
        (("input", "output"), "a.png", "exactly one destination tag"),
        (("models",), "w.safetensors", "model_type"),
        (("models", "model_type:nope"), "w.safetensors", "unknown model category"),
        (("models", "model_type:loras"), "w.exe", "lists only"),
    ],
)
async def test_bad_uploads_are_400(client, workspace, tags, filename, message):
    r = await client.post("/api/assets", data=_form(b"abc", filename, *tags))
    assert r.status == 400
    body = await r.json()
    assert body["error"]["code"] == "INVALID_BODY" and message in body["error"]["message"]
    assert not list(workspace.input_dir.iterdir())


async def test_bad_bodies_are_400(client, workspace):
    (workspace.input_dir / "a.png").write_bytes(_png())
    aid = (await _list(client))["assets"][0]["id"]
    cases = [
        ("PUT", f"/api/assets/{aid}", {}, "INVALID_BODY"),
        ("PUT", f"/api/assets/{aid}", {"preview_id": aid}, "INVALID_BODY"),
        ("POST", f"/api/assets/{aid}/tags", {"tags": []}, "INVALID_BODY"),
        ("POST", f"/api/assets/{aid}/tags", {"tags": ["missing"]}, "SYSTEM_TAG_FORBIDDEN"),
        ("POST", "/api/assets/from-hash", {"hash": "md5:1"}, "INVALID_BODY"),
        ("GET", "/api/tags?limit=0", None, "INVALID_QUERY"),
        ("POST", "/api/assets/seed", {"roots": ["nowhere"]}, "INVALID_BODY"),
    ]
    for method, url, body, code in cases:
        r = await client.request(method, url, json=body)
        assert r.status == 400, (url, body, r.status)
        assert (await r.json())["error"]["code"] == code, (url, body)
    r = await client.put(f"/api/assets/{aid}", data=b"{not json")
    assert r.status == 400 and (await r.json())["error"]["code"] == "INVALID_JSON"
    r = await client.post("/api/assets", json={"x": 1})
    assert r.status == 400
    r = await client.post("/api/assets", data=_form(b"", "e.png", "input"))
    assert r.status == 400 and (await r.json())["error"]["code"] == "EMPTY_UPLOAD"
    r = await client.post("/api/assets", data=_form(b"abc", "e.png", "input", hash="blake3:" + "2" * 64))
    assert r.status == 400 and (await r.json())["error"]["code"] == "HASH_MISMATCH"
    assert (await client.get("/api/assets/00000000-0000-0000-0000-000000000000")).status == 404


async def test_seed_without_wait_tells_the_web_ui_when_done(client, workspace):
    (workspace.models_dir / "vae" / "v.safetensors").write_bytes(b"v")
    ws = await client.ws_connect("/ws?clientId=seed")
    await ws.receive_json()  # status
    r = await client.post("/api/assets/seed", json={"roots": ["models"]})
    assert r.status == 202 and await r.json() == {"status": "started"}
    while True:
        msg = json.loads((await ws.receive(timeout=10)).data)
        if msg["type"] == "assets.seed.fast_complete":
            break
    assert msg["data"]["roots"] == ["models"] and msg["data"]["created"] == 1
    completed = json.loads((await ws.receive(timeout=10)).data)
    assert completed["type"] == "assets.seed.completed" and completed["data"]["phase"] == "full"
    await ws.close()


async def test_features_advertise_assets(client):
    flags = await (await client.get("/api/features")).json()
    assert flags["assets"] is True and flags["supports_model_type_tags"] is True


async def test_cursor_pages_are_not_shifted_by_new_files(client, workspace):
    for name in ("a.png", "b.png", "c.png", "d.png"):
        (workspace.output_dir / name).write_bytes(_png())
    first = await _list(client, "?limit=2")  # newest first (created_at desc), as the web UI pages outputs
    (workspace.output_dir / "new.png").write_bytes(_png())
    await _list(client, "?limit=1")  # a refresh indexes the new file at the head of the list
    rest = await _list(client, f"?limit=2&after={first['next_cursor']}")
    seen = [a["name"] for a in first["assets"] + rest["assets"]]
    assert sorted(seen) == ["a.png", "b.png", "c.png", "d.png"] and rest["has_more"] is False


async def test_outputs_name_the_job_that_made_them(client, workspace):
    from tests.server.conftest import simple_prompt, wait_history

    r = await client.post("/prompt", json={"prompt": simple_prompt("jobout")})
    prompt_id = (await r.json())["prompt_id"]
    entry = await wait_history(client, prompt_id)
    assert entry["status"]["status_str"] == "success"
    (workspace.output_dir / "by_hand.png").write_bytes(_png())
    outputs = {a["name"]: a for a in (await _list(client, "?tags_any=output,temp"))["assets"]}
    made = [a for name, a in outputs.items() if name.startswith("jobout")]
    assert made and all(a["job_id"] == a["prompt_id"] == prompt_id for a in made)
    assert "job_id" not in outputs["by_hand.png"]


async def test_temp_files_are_listed_as_temp(client, workspace):
    (workspace.temp_dir / "preview.png").write_bytes(_png())
    asset = (await _list(client, "?tags_any=output,temp"))["assets"][0]
    assert asset["tags"] == ["temp"] and asset["preview_url"] == "/api/view?type=temp&filename=preview.png"


def test_a_listing_brings_up_to_date_only_the_roots_its_filter_can_match():
    from comfy_bridge.server.asset_index import LISTED, roots_for

    assert roots_for([], ["output", "temp"]) == ("output", "temp")  # the web UI's outputs poll
    assert roots_for(["models"], []) == ("models",)  # its model walk
    assert roots_for(["model_type:loras"], ["x"]) == ("models",)
    assert roots_for([], ["input", "mine"]) == LISTED  # a user tag may be on any root
    assert roots_for([], []) == LISTED


@pytest.mark.filterwarnings("ignore:In v4, passing bytes:DeprecationWarning")  # the nameless file part
async def test_odd_upload_forms(client, workspace):
    # A file part with no file name is still the file; its stored name has no extension then.
    form = aiohttp.FormData()
    form.add_field("file", b"bytes", content_type="application/octet-stream")
    form.add_field("tags", "input")
    r = await client.post("/api/assets", data=form)
    assert r.status == 201, await r.text()
    assert "." not in (await r.json())["loader_path"]
    # An extension that is not a plain one is dropped from the stored name (the name is the hash).
    r = await client.post("/api/assets", data=_form(b"other", "x.p\u00e9ng;rm", "input"))
    assert r.status == 201 and "." not in (await r.json())["loader_path"]
    two = _form(b"one", "a.png", "input")
    two.add_field("file", b"two", filename="b.png", content_type="image/png")
    r = await client.post("/api/assets", data=two)
    assert r.status == 400 and "one 'file' part" in (await r.json())["error"]["message"]
    r = await client.post("/api/assets", data=_form(b"abc", "a.png", "input", *[f"t{i}" for i in range(70)]))
    assert r.status == 400 and "at most 64 tags" in json.dumps(await r.json())
    (workspace.input_dir / "a.png").write_bytes(_png())
    aid = (await _list(client, "?name_contains=a.png"))["assets"][0]["id"]
    r = await client.post(f"/api/assets/{aid}/tags", json={"tags": ["x" * 300]})
    assert r.status == 400 and "at most 256 characters" in json.dumps(await r.json())


async def test_scan_times_records_and_retires_vanished_previews(client, workspace):
    import os

    for i, name in enumerate(("first.png", "second.png")):
        path = workspace.output_dir / name
        path.write_bytes(_png())
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))
    (workspace.temp_dir / "p.png").write_bytes(_png())
    names = [a["name"] for a in (await _list(client, "?tags_any=output&sort=created_at&order=asc"))["assets"]]
    assert names == ["first.png", "second.png"]  # in the order they were written, though found in one scan
    assert (await _list(client, "?tags_any=output"))["assets"][0]["created_at"].startswith("2023-11-14T22:13:21")
    assert (await _list(client, "?tags_any=temp"))["total"] == 1
    (workspace.temp_dir / "p.png").unlink()
    assert (await _list(client, "?tags_any=temp"))["total"] == 0  # gone, not kept as missing


async def test_a_seed_of_one_root_brings_back_only_its_deleted_records(client, workspace):
    (workspace.input_dir / "i.png").write_bytes(_png())
    (workspace.output_dir / "o.png").write_bytes(_png())
    for asset in (await _list(client))["assets"]:
        assert (await client.delete(f"/api/assets/{asset['id']}")).status == 204
    assert (await client.post("/api/assets/seed?wait=true", json={"roots": ["output"]})).status == 200
    assert [a["name"] for a in (await _list(client))["assets"]] == ["o.png"]


async def test_disable_assets_turns_the_api_off_as_comfyui_does(make_client, workspace):
    client = await make_client(disable_assets=True)
    r = await client.get("/api/assets")
    assert r.status == 503 and (await r.json())["error"]["code"] == "SERVICE_DISABLED"
    assert (await client.post("/api/assets/seed", json={})).status == 503
    assert (await (await client.get("/api/features")).json())["assets"] is False


def test_the_cli_flag_reaches_the_server_config():
    import argparse

    from comfy_bridge.cli.flags import add_comfyui_flags

    parser = argparse.ArgumentParser()
    add_comfyui_flags(parser)
    assert parser.parse_args(["--disable-assets"]).disable_assets is True
    assert parser.parse_args([]).disable_assets is False


async def test_an_upload_supersedes_a_bare_scan_record_of_its_file(client, workspace):
    data = _png((3, 1, 4))
    stored = blake3.blake3(data).hexdigest() + ".png"
    (workspace.input_dir / stored).write_bytes(data)  # as a listing that ran mid-upload would have found it
    assert [a["name"] for a in (await _list(client))["assets"]] == [stored]
    r = await client.post("/api/assets", data=_form(data, "mine.png", "input", name="Mine"))
    assert r.status in (200, 201), await r.text()
    assert [a["name"] for a in (await _list(client))["assets"]] == ["Mine"]
