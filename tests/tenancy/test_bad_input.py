"""Bad input to a hosted server: a stored row from an older version (number Infinity, an unreadable
item) neither stops the server from starting nor reaches a response as NaN/Infinity; SQLite-bound
query integers, nested login bodies and per-tenant prompt limits get a clear 4xx."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tenant_nodes as tn
from aiohttp.test_utils import TestClient, TestServer

from comfy_bridge.cli import main
from comfy_bridge.server import ServerConfig, create_app
from comfy_bridge.server.app import SERVER_KEY
from comfy_bridge.tenancy.store import Store


def _strict(text: str):
    def refuse(name):
        raise AssertionError(f"{name} in a response")

    return json.loads(text, parse_constant=refuse)


def _app(workspace, tmp_path: Path):
    web = tmp_path / "web"
    web.mkdir(exist_ok=True)
    (web / "index.html").write_text("<html>ui</html>")
    config = ServerConfig(workspace=workspace, state_db=tmp_path / "state.sqlite3", front_end_root=web)
    return create_app(config, registry=tn.registry())


async def test_number_1e999_is_refused_and_nothing_stored(hosted):
    raw = '{"number": 1e999, "prompt": ' + json.dumps(tn.prompt(1)) + "}"
    r = await hosted.client.post("/prompt", data=raw)
    assert r.status == 400 and _strict(await r.text())["error"]["type"] == "invalid_json"
    assert hosted.store.queue_rows() == []


async def test_restart_survives_bad_stored_rows_and_never_emits_infinity(workspace, tmp_path):
    store = Store(tmp_path / "state.sqlite3")
    # What an older version stored for `"number": 1e999` and `-1e999`, and a row damaged by hand.
    store.queue_add("", "inf", float("inf"), [float("inf"), "inf", tn.prompt(1), {}, ["2"]])
    store.queue_add("", "neg", float("-inf"), [float("-inf"), "neg", tn.prompt(2), {}, ["2"]])
    store.queue_add("", "ok", 3.0, [3.0, "ok", tn.prompt(3), {}, ["2"]])
    bad = store.queue_add("", "broken", 4.0, [4.0, "broken", tn.prompt(4), {}, ["2"]])
    store._exec("UPDATE queue SET item = '[4.0, \"broken\", {' WHERE id = ?", (bad,))
    store.finish(
        store.queue_add("", "old", 5.0, []),
        "old",
        "",
        {"prompt": [float("inf"), "old", {}, {}, []], "outputs": {}, "status": None, "meta": {}},
        100,
    )
    store.finish(store.queue_add("", "torn", 6.0, []), "torn", "", {}, 100)
    store._exec("UPDATE history SET entry = '{\"prompt\": [' WHERE prompt_id = 'torn'")
    store.close()
    app = _app(workspace, tmp_path)  # the old code died here: int(inf) in TenantPromptServer
    server = app[SERVER_KEY]
    server.prompt_queue.get = lambda timeout=None: None  # keep the rows pending to look at them
    async with TestClient(TestServer(app)) as client:
        queue = _strict(await (await client.get("/queue")).text())
        pending = {item[1]: item[0] for item in queue["queue_pending"] + queue["queue_running"]}
        assert pending == {"neg": 2.0, "ok": 3.0, "inf": 4.0}  # before and after the valid ones
        jobs = _strict(await (await client.get("/jobs")).text())["jobs"]
        assert {job["id"] for job in jobs} == {"neg", "ok", "inf", "old"}
        history = _strict(await (await client.get("/history")).text())
        assert list(history) == ["old"] and history["old"]["prompt"][0] is None
        _strict(await (await client.get("/jobs/old")).text())
        r = await client.post("/prompt", json={"prompt": tn.prompt(7)})
        assert r.status == 200 and _strict(await r.text())["number"] == 5


async def test_history_paging_beyond_sqlite_integers_is_400(hosted):
    for query in ("max_items=99999999999999999999", "offset=99999999999999999999"):
        r = await hosted.client.get("/history?" + query)
        assert r.status == 400 and "error" in _strict(await r.text())
    assert (await hosted.client.get("/history?max_items=5")).status == 200


@pytest.mark.parametrize("body", [b"[" * 100_000, b'{"key": ' + b"[" * 100_000], ids=["list", "in-key"])
async def test_login_with_absurd_nesting_is_400(hosted, body):
    hosted.add("alice")
    r = await hosted.client.post("/login", data=body, headers={"Content-Type": "application/json"})
    assert r.status == 400 and _strict(await r.text())["error"]["type"] == "invalid_json"


async def test_text_limit_per_tenant_and_server_default(hosted):
    from comfy_bridge.server.config import DEFAULT_MAX_TEXT_CHARS

    terse = hosted.add("terse", max_text_chars=20)
    roomy = hosted.add("roomy")
    prompt = tn.prompt(1, prefix="p" * 21)
    r = await hosted.client.post("/prompt", json={"prompt": prompt}, headers=terse)
    body = _strict(await r.text())
    assert r.status == 413 and body["error"]["extra_info"] == {"limit": "max_text_chars", "allowed": 20}
    assert (await hosted.client.post("/prompt", json={"prompt": prompt}, headers=roomy)).status == 200
    long = tn.prompt(1, prefix="p" * (DEFAULT_MAX_TEXT_CHARS + 1))
    r = await hosted.client.post("/prompt", json={"prompt": long}, headers=roomy)
    assert r.status == 413 and _strict(await r.text())["error"]["extra_info"]["limit"] == "max_text_chars"
    hosted.store.update_tenant("roomy", max_text_chars=DEFAULT_MAX_TEXT_CHARS + 1)
    hosted.server.gate._tenants.clear()
    assert (await hosted.client.post("/prompt", json={"prompt": long}, headers=roomy)).status == 200


async def test_server_default_body_limit_applies_to_tenants_without_their_own(hosted):
    alice = hosted.add("alice")
    hosted.server.quotas._prompt_defaults = (500, None)
    r = await hosted.client.post(
        "/prompt", json={"prompt": tn.prompt(1), "extra_data": {"x": "y" * 500}}, headers=alice
    )
    assert r.status == 413 and _strict(await r.text())["error"]["extra_info"]["limit"] == "max_prompt_bytes"


def test_tenants_cli_sets_text_limit(tmp_path, capsys):
    db = str(tmp_path / "s.sqlite3")
    assert main(["tenants", "--state-db", db, "add", "bob", "--max-text-chars", "5000"]) == 0
    assert json.loads(capsys.readouterr().out)["max_text_chars"] == 5000
    assert main(["tenants", "--state-db", db, "set", "bob", "--max-text-chars", "0"]) == 0
    assert json.loads(capsys.readouterr().out)["max_text_chars"] is None
    assert main(["tenants", "--state-db", db, "add", "eve", "--weight", "inf"]) == 1


def test_serve_flags_set_the_server_defaults():
    from comfy_bridge.cli import build_parser
    from comfy_bridge.cli.tenants import prompt_limits
    from comfy_bridge.server.config import DEFAULT_MAX_PROMPT_BYTES, DEFAULT_MAX_TEXT_CHARS

    args = build_parser().parse_args(["serve"])
    assert prompt_limits(args) == {
        "max_prompt_bytes": DEFAULT_MAX_PROMPT_BYTES,
        "max_text_chars": DEFAULT_MAX_TEXT_CHARS,
    }
    args = build_parser().parse_args(["serve", "--max-prompt-bytes", "0", "--max-text-chars", "500"])
    assert prompt_limits(args) == {"max_prompt_bytes": None, "max_text_chars": 500}
