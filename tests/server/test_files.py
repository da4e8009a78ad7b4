"""/view, /upload/image, /upload/mask, /view_metadata: content, naming, limits and traversal refusal."""

import io
import json
import os
import struct

import aiohttp
from PIL import Image


def png_bytes(color=(255, 0, 0, 128), size=(4, 4)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGBA", size, color).save(buf, format="PNG")
    return buf.getvalue()


def form(data: bytes, name="up.png", **fields) -> aiohttp.FormData:
    f = aiohttp.FormData()
    f.add_field("image", data, filename=name, content_type="image/png")
    for k, v in fields.items():
        f.add_field(k, v)
    return f


async def test_upload_then_view_roundtrip(client, workspace):
    data = png_bytes()
    r = await client.post("/upload/image", data=form(data, subfolder="sub"))
    assert r.status == 200
    assert await r.json() == {"name": "up.png", "subfolder": "sub", "type": "input"}
    assert (workspace.input_dir / "sub" / "up.png").read_bytes() == data
    r = await client.get("/view", params={"filename": "up.png", "subfolder": "sub", "type": "input"})
    assert r.status == 200 and await r.read() == data
    assert r.headers["Content-Type"] == "image/png"
    assert r.headers["Content-Disposition"] == 'filename="up.png"'
    r = await client.get("/api/view", params={"filename": "up.png [input]", "subfolder": "sub"})
    assert r.status == 200


async def test_duplicate_upload_reuses_name_and_different_content_is_numbered(client, workspace):
    a, b = png_bytes((1, 2, 3, 255)), png_bytes((9, 9, 9, 255))
    names = []
    for data in (a, a, b, b, a):
        r = await client.post("/upload/image", data=form(data))
        names.append((await r.json())["name"])
    assert names == ["up.png", "up.png", "up (1).png", "up (1).png", "up.png"]
    r = await client.post("/upload/image", data=form(b, overwrite="true"))
    assert (await r.json())["name"] == "up.png"
    assert (workspace.input_dir / "up.png").read_bytes() == b


async def test_upload_to_temp_and_output_and_bad_type(client, workspace):
    r = await client.post("/upload/image", data=form(png_bytes(), type="temp"))
    assert (await r.json())["type"] == "temp" and (workspace.temp_dir / "up.png").exists()
    r = await client.post("/upload/image", data=form(png_bytes(), type="bogus"))
    assert r.status == 400
    f = aiohttp.FormData()
    f.add_field("other", "x")
    assert (await client.post("/upload/image", data=f)).status == 400


async def test_upload_traversal_refused_and_nothing_written_outside(client, workspace, tmp_path):
    before = set(tmp_path.rglob("*"))
    for fields, name in (
        ({"subfolder": "../../etc"}, "up.png"),
        ({"subfolder": "/tmp"}, "up.png"),
        ({"subfolder": "..\\..\\x"}, "up.png"),
        ({"subfolder": "%2e%2e%2fx"}, "up.png"),
        ({}, "../evil.png"),
        ({}, "..\\evil.png"),
        ({}, "a/../../evil.png"),
    ):
        r = await client.post("/upload/image", data=form(png_bytes(), name=name, **fields))
        assert r.status == 400, (fields, name)
    assert set(tmp_path.rglob("*")) == before
    assert (await client.get("/prompt")).status == 200


async def test_upload_through_symlink_out_is_refused(client, workspace, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, workspace.input_dir / "link")
    r = await client.post("/upload/image", data=form(png_bytes(), subfolder="link"))
    assert r.status == 400
    assert list(outside.iterdir()) == []


async def test_upload_size_cap_is_413_and_server_keeps_serving(make_client):
    client = await make_client(max_upload_size=0.01)  # ~10 KB
    r = await client.post("/upload/image", data=form(b"x" * 20000))
    assert r.status == 413
    r = await client.post("/upload/image", data=form(png_bytes()))
    assert r.status == 200
    feats = await (await client.get("/features")).json()
    assert feats["max_upload_size"] == round(0.01 * 1024 * 1024)


async def test_view_traversal_and_errors(client, workspace, tmp_path):
    (tmp_path / "secret.txt").write_text("secret")
    (workspace.output_dir / "ok.png").write_bytes(png_bytes())
    os.symlink(tmp_path, workspace.output_dir / "escape")
    cases = {
        ("../secret.txt", "", "output"): 400,
        ("/etc/passwd", "", "output"): 400,
        ("..\\secret.txt", "", "output"): 400,
        ("%2e%2e%2fsecret.txt", "", "output"): 400,
        ("ok.png", "../../", "output"): 403,
        ("secret.txt", "..", "output"): 403,
        ("secret.txt", "/tmp", "output"): 403,
        ("secret.txt", "escape", "output"): 403,
        ("ok.png", "", "bogus"): 400,
        ("missing.png", "", "output"): 404,
        ("", "", "output"): 400,
    }
    for (filename, subfolder, type_), status in cases.items():
        r = await client.get("/view", params={"filename": filename, "subfolder": subfolder, "type": type_})
        assert r.status == status, (filename, subfolder, type_, r.status)
    # Raw encoded separators in the query string decode to traversal and are refused too.
    r = await client.get("/view?filename=..%2F..%2Fsecret.txt&type=output")
    assert r.status == 400
    r = await client.get("/view?filename=%252e%252e%252fsecret.txt&type=output")
    assert r.status == 400
    assert (await client.get("/view")).status == 404
    assert (await client.get("/view?filename=ok.png")).status == 200


async def test_view_preview_and_channels(client, workspace):
    (workspace.output_dir / "c.png").write_bytes(png_bytes((10, 20, 30, 77)))
    r = await client.get("/view?filename=c.png&preview=webp;50")
    assert r.headers["Content-Type"] == "image/webp"
    assert Image.open(io.BytesIO(await r.read())).format == "WEBP"
    r = await client.get("/view?filename=c.png&preview=jpeg;80")
    assert r.headers["Content-Type"] == "image/jpeg"
    r = await client.get("/view?filename=c.png&channel=rgb")
    img = Image.open(io.BytesIO(await r.read()))
    assert img.mode == "RGB" and img.getpixel((0, 0)) == (10, 20, 30)
    r = await client.get("/view?filename=c.png&channel=a")
    img = Image.open(io.BytesIO(await r.read()))
    assert img.mode == "RGBA" and img.getpixel((0, 0)) == (0, 0, 0, 77)


async def test_view_never_serves_html_as_html(client, workspace):
    (workspace.output_dir / "x.html").write_text("<script>alert(1)</script>")
    r = await client.get("/view?filename=x.html")
    assert r.status == 200 and r.headers["Content-Type"] == "application/octet-stream"


async def test_upload_mask_merges_alpha_into_original(client, workspace):
    original = io.BytesIO()
    Image.new("RGB", (4, 4), (200, 100, 50)).save(original, format="PNG")
    (workspace.input_dir / "orig.png").write_bytes(original.getvalue())
    mask = png_bytes((0, 0, 0, 30))
    ref = json.dumps({"filename": "orig.png [input]"})
    r = await client.post("/upload/mask", data=form(mask, name="clipspace-mask.png", original_ref=ref))
    assert r.status == 200 and (await r.json())["name"] == "clipspace-mask.png"
    img = Image.open(workspace.input_dir / "clipspace-mask.png")
    assert img.mode == "RGBA" and img.getpixel((0, 0)) == (200, 100, 50, 30)
    ref = json.dumps({"filename": "../../etc/passwd"})
    r = await client.post("/upload/mask", data=form(mask, name="m2.png", original_ref=ref))
    assert r.status == 200 and not (workspace.input_dir / "m2.png").exists()


async def test_view_metadata_reads_safetensors_header(client, workspace):
    header = json.dumps({"__metadata__": {"ss_name": "tiny"}}).encode()
    path = workspace.models_dir / "loras" / "tiny.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header)
    r = await client.get("/view_metadata/loras?filename=tiny.safetensors")
    assert r.status == 200 and await r.json() == {"ss_name": "tiny"}
    assert (await client.get("/view_metadata/loras?filename=nope.safetensors")).status == 404
    assert (await client.get("/view_metadata/loras?filename=tiny.ckpt")).status == 404
    r = await client.get("/view_metadata/loras?filename=../../../x.safetensors")
    assert r.status in (403, 404)


async def test_internal_files_lists_newest_first(client, workspace):
    a, b = workspace.input_dir / "a.png", workspace.input_dir / "b.png"
    a.write_bytes(b"a")
    b.write_bytes(b"b")
    os.utime(a, (1, 1))
    r = await client.get("/internal/files/input")
    assert await r.json() == ["b.png", "a.png"]
    assert (await client.get("/internal/files/models")).status == 400
    assert (await client.get("/api/internal/files/input")).status == 404  # not mirrored under /api


async def test_upload_mask_onto_a_file_that_is_not_an_image_is_a_400(client, workspace):
    (workspace.input_dir / "fake.png").write_bytes(b"not an image at all")
    ref = json.dumps({"filename": "fake.png [input]"})
    r = await client.post("/upload/mask", data=form(png_bytes((0, 0, 0, 30)), name="m3.png", original_ref=ref))
    assert r.status == 400 and "fake.png" in await r.text()
    assert not (workspace.input_dir / "m3.png").exists()
    (workspace.input_dir / "real.png").write_bytes(png_bytes((1, 2, 3, 255)))
    r = await client.post(
        "/upload/mask", data=form(b"garbage", name="m4.png", original_ref=json.dumps({"filename": "real.png [input]"}))
    )
    assert r.status == 400 and not (workspace.input_dir / "m4.png").exists()  # the mask is not an image
