"""Bad input to the prompt, queue, history and upload routes: each is a 4xx in ComfyUI's error shape,
nothing is queued or stored, and no response carries NaN or Infinity (not JSON)."""

import json

import pytest

from .conftest import simple_prompt, wait_history
from .test_files import form, png_bytes


def _strict(text: str):
    """Parse as a browser's JSON.parse would: NaN and Infinity are errors."""

    def refuse(name):
        raise AssertionError(f"{name} in a response")

    return json.loads(text, parse_constant=refuse)


async def _error(r, status: int = 400) -> dict:
    assert r.status == status, await r.text()
    body = _strict(await r.text())
    assert set(body["error"]) == {"type", "message", "details", "extra_info"}, body
    return body["error"]


async def _nothing_queued(client) -> None:
    queue = _strict(await (await client.get("/queue")).text())
    assert queue == {"queue_running": [], "queue_pending": []}
    assert _strict(await (await client.get("/history")).text()) == {}


def _raw(number: str) -> bytes:
    return ('{"number": ' + number + ', "prompt": ' + json.dumps(simple_prompt()) + "}").encode()


@pytest.mark.parametrize(
    "raw",
    [
        _raw("1e999"),
        _raw("-1e999"),
        _raw("NaN"),
        _raw("Infinity"),
        _raw('"inf"'),
        _raw('"nan"'),
        _raw(str(2**60)),
        _raw("1" + "0" * 400),
    ],
    ids=["1e999", "-1e999", "NaN", "Infinity", "str-inf", "str-nan", "2**60", "10**400"],
)
async def test_non_finite_or_out_of_range_number_is_400(client, raw):
    await _error(await client.post("/prompt", data=raw))
    await _nothing_queued(client)


async def test_largest_number_in_range_is_accepted(client):
    r = await client.post("/prompt", data=_raw(str(2**53)))
    assert r.status == 200 and _strict(await r.text())["number"] == 2**53


async def test_five_thousand_digit_integer_anywhere_is_400(client):
    digits = "7" * 5000
    body = {"prompt": simple_prompt(), "extra_data": {"x": 0}}
    raw = json.dumps(body).replace('"x": 0', f'"x": {digits}').encode()
    assert (await _error(await client.post("/prompt", data=raw)))["type"] == "invalid_json"
    await _nothing_queued(client)


@pytest.mark.parametrize(
    "body",
    [
        {"prompt": {"1": 5}},
        {"prompt": {"1": [1, 2]}},
        {"prompt": {"1": {"class_type": {"a": 1}, "inputs": {}}}},
        {"prompt": {"1": {"class_type": "StubImage", "inputs": 5}}},
        {"prompt": simple_prompt(), "partial_execution_targets": 5},
        {"prompt": simple_prompt(), "partial_execution_targets": [2]},
        {"prompt": simple_prompt(), "client_id": {"a": 1}},
        {"prompt": simple_prompt(), "client_id": 7},
        {"prompt": simple_prompt(), "extra_data": {"client_id": ["x"]}},
    ],
)
async def test_malformed_prompt_fields_are_400_invalid_prompt(client, body):
    assert (await _error(await client.post("/prompt", json=body)))["type"] == "invalid_prompt"
    await _nothing_queued(client)


async def test_string_client_id_and_targets_still_accepted(client):
    r = await client.post(
        "/prompt", json={"prompt": simple_prompt(), "client_id": "c1", "partial_execution_targets": ["2"]}
    )
    assert r.status == 200
    entry = await wait_history(client, (await r.json())["prompt_id"])
    assert entry["prompt"][3]["client_id"] == "c1"


@pytest.mark.parametrize("path", ["/queue", "/history", "/api/queue", "/api/history"])
@pytest.mark.parametrize("delete", [5, "abc", {"a": 1}])
async def test_delete_that_is_not_a_list_is_400(client, path, delete):
    await _error(await client.post(path, json={"delete": delete}))


@pytest.mark.parametrize(
    "query",
    ["max_items=99999999999999999999", "offset=-99999999999999999999", "max_items=" + "9" * 5000, "max_items=x"],
    ids=["20-digits", "-20-digits", "5000-digits", "word"],
)
async def test_history_paging_beyond_64_bits_is_400(client, query):
    await _error(await client.get("/history?" + query))


def _multipart(filename: str, subfolder: str = "") -> tuple[bytes, dict]:
    """Built by hand: aiohttp's client refuses to send a NUL in a header, other clients do not."""
    parts = [
        b'--B\r\nContent-Disposition: form-data; name="image"; filename="'
        + filename.encode()
        + b'"\r\nContent-Type: image/png\r\n\r\n'
        + png_bytes()
        + b"\r\n"
    ]
    if subfolder:
        parts.append(b'--B\r\nContent-Disposition: form-data; name="subfolder"\r\n\r\n' + subfolder.encode() + b"\r\n")
    return b"".join(parts) + b"--B--\r\n", {"Content-Type": "multipart/form-data; boundary=B"}


async def test_nul_in_upload_filename_is_400(client, workspace):
    for name, subfolder in (("bad\x00name.png", ""), ("bad.png\x00", ""), ("bad.png", "a\x00b")):
        body, headers = _multipart(name, subfolder)
        assert (await client.post("/upload/image", data=body, headers=headers)).status == 400, (name, subfolder)
    assert not any(p.name.startswith("bad") for p in workspace.input_dir.iterdir())


async def test_overwrite_onto_a_folder_name_is_400_and_keeps_the_folder(client, workspace):
    folder = workspace.input_dir / "taken.png"
    folder.mkdir()
    (folder / "inside.txt").write_text("kept")
    r = await client.post("/upload/image", data=form(png_bytes(), name="taken.png", overwrite="true"))
    assert r.status == 400
    assert (folder / "inside.txt").read_text() == "kept"
    # Without overwrite the name is numbered as for any taken name.
    r = await client.post("/upload/image", data=form(png_bytes(), name="taken.png"))
    assert r.status == 200 and (await r.json())["name"] == "taken (1).png"
