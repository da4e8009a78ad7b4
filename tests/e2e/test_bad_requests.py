"""Bad requests against a real server: each gets ComfyUI's error shape (or a 4xx for files), the server
keeps serving, and nothing is written outside the workspace."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def base(serve):
    return serve("--executors", "0", "--max-upload-size", "12")


def _request(url: str, data: bytes | None = None, method: str | None = None, headers: dict | None = None):
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _post_prompt(base: str, prompt) -> tuple[int, dict]:
    status, body = _request(base + "/prompt", json.dumps({"prompt": prompt}).encode())
    return status, json.loads(body)


def _still_serving(base: str) -> None:
    status, body = _request(base + "/object_info/KSampler")
    assert status == 200 and "KSampler" in json.loads(body)


def _default() -> dict:
    return json.loads((REPO / "workflows_json" / "text_to_image.json").read_text())


def test_non_json_body(base):
    status, body = _request(base + "/prompt", b"{not json", headers={"Content-Type": "application/json"})
    assert status == 400 and "error" in json.loads(body)
    _still_serving(base)


def test_unknown_node_class(base):
    prompt = _default()
    prompt["3"]["class_type"] = "NoSuchNode"
    status, body = _post_prompt(base, prompt)
    assert status == 400 and body["error"]["type"] in ("invalid_prompt", "missing_node_type")
    _still_serving(base)


def test_cycle(base):
    prompt = _default()
    prompt["6"]["inputs"]["clip"] = ["10", 0]
    prompt["10"] = {"class_type": "CLIPSetLastLayer", "inputs": {"clip": ["10", 0], "stop_at_clip_layer": -1}}
    status, body = _post_prompt(base, prompt)
    assert status == 400 and "error" in body
    _still_serving(base)


def test_wrong_link_type(base):
    prompt = _default()
    prompt["3"]["inputs"]["positive"] = ["5", 0]  # LATENT into CONDITIONING
    status, body = _post_prompt(base, prompt)
    assert status == 400
    errors = body["node_errors"]["3"]["errors"]
    assert errors[0]["type"] == "return_type_mismatch" and errors[0]["extra_info"]["input_name"] == "positive"


def test_out_of_range_value(base):
    prompt = _default()
    prompt["3"]["inputs"]["cfg"] = 1000.0
    status, body = _post_prompt(base, prompt)
    assert status == 400 and body["node_errors"]["3"]["errors"][0]["type"] == "value_bigger_than_max"


def test_ten_megabyte_prompt_is_413_naming_the_limit(base):
    prompt = _default()
    # Over the default --max-prompt-bytes (8 MiB): refused before it is parsed, let alone encoded.
    prompt["99"] = {"class_type": "CLIPTextEncode", "inputs": {"clip": ["4", 1], "text": "x" * (10 * 1024 * 1024)}}
    status, body = _post_prompt(base, prompt)
    assert status == 413 and body["error"]["extra_info"]["limit"] == "max_prompt_bytes"
    _still_serving(base)


def test_two_megabyte_prompt_text_is_413_naming_the_limit(base):
    prompt = _default()
    prompt["6"]["inputs"]["text"] = "a cat " * 350_000  # 2.1 MB of text: 109 s of CLIP CPU before the limit
    status, body = _post_prompt(base, prompt)
    assert status == 413 and body["error"]["extra_info"]["limit"] == "max_text_chars"
    assert "node 6" in body["error"]["message"]
    _still_serving(base)


def test_five_thousand_node_prompt(base):
    prompt = {str(i): {"class_type": "ImageInvert", "inputs": {"image": [str(i - 1), 0]}} for i in range(1, 5000)}
    prompt["0"] = {"class_type": "EmptyImage", "inputs": {"width": 8, "height": 8, "batch_size": 1, "color": 0}}
    prompt["5000"] = {"class_type": "PreviewImage", "inputs": {"images": ["4999", 0]}}
    status, body = _post_prompt(base, prompt)
    assert status == 200 and body["node_errors"] == {}
    _still_serving(base)


def test_deeply_nested_lists(base):
    nested = "[" * 100_000 + "]" * 100_000
    body = ('{"prompt": {"1": {"class_type": "ImageInvert", "inputs": {"image": ' + nested + "}}}}").encode()
    status, _ = _request(base + "/prompt", body)
    assert status == 400
    _still_serving(base)


@pytest.mark.parametrize(
    "query",
    [
        "filename=../../etc/passwd",
        "filename=..%2f..%2fetc%2fpasswd",
        "filename=passwd&subfolder=../../../etc",
        "filename=/etc/passwd",
        "filename=x.png&type=../../etc",
    ],
)
def test_view_traversal(base, query):
    status, _ = _request(base + "/view?" + query)
    assert status in (400, 403, 404)


def test_upload_traversal_and_size(base, demo_workspace):
    boundary = "XXBOUNDARY"

    def multipart(filename: str, payload: bytes, subfolder: str = "") -> bytes:
        parts = [
            f'--{boundary}\r\nContent-Disposition: form-data; name="image"; filename="{filename}"\r\n'
            f"Content-Type: image/png\r\n\r\n".encode()
            + payload
            + b"\r\n"
        ]
        if subfolder:
            parts.append(
                f'--{boundary}\r\nContent-Disposition: form-data; name="subfolder"\r\n\r\n{subfolder}\r\n'.encode()
            )
        return b"".join(parts) + f"--{boundary}--\r\n".encode()

    headers = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
    outside = demo_workspace.root.parent / "escaped.png"
    status, _ = _request(base + "/upload/image", multipart("x.png", b"\x89PNG", "../../"), headers=headers)
    assert status in (400, 403)
    status, _ = _request(base + "/upload/image", multipart("../escaped.png", b"\x89PNG"), headers=headers)
    assert status in (200, 400, 403) and not outside.exists()
    status, _ = _request(base + "/upload/image", multipart("big.png", b"0" * (13 * 1024 * 1024)), headers=headers)
    assert status == 413
    _still_serving(base)


@pytest.mark.parametrize(
    "path", ["/userdata/..%2f..%2fsecret.json", "/userdata/%2e%2e%2fsecret.json", "/userdata/..%5csecret.json"]
)
def test_userdata_traversal(base, demo_workspace, path):
    status, _ = _request(base + path, b"{}", method="POST")
    assert status in (400, 403, 404)
    assert not (demo_workspace.root / "secret.json").exists()
    assert not (demo_workspace.user_dir.parent / "secret.json").exists()
