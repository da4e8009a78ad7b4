"""Users, /userdata, /v2/userdata and /settings as the web UI uses them, including traversal refusal."""

from urllib.parse import quote


def enc(path: str) -> str:
    return quote(path, safe="")


async def test_users_single_user(client, workspace):
    body = await (await client.get("/api/users")).json()
    assert body == {"storage": "server", "migrated": False}
    (workspace.user_dir / "default").mkdir()
    assert (await (await client.get("/users")).json())["migrated"] is True


async def test_userdata_write_read_list_move_delete(client, workspace):
    r = await client.post(f"/api/userdata/{enc('workflows/test.json')}", data=b'{"a":1}')
    assert r.status == 200 and await r.json() == "workflows/test.json"
    assert (workspace.user_dir / "default" / "workflows" / "test.json").read_bytes() == b'{"a":1}'
    r = await client.post(f"/userdata/{enc('workflows/test.json')}?overwrite=false", data=b"x")
    assert r.status == 409
    r = await client.post(f"/userdata/{enc('workflows/test.json')}?full_info=true", data=b"1234567")
    info = await r.json()
    assert info["path"] == "workflows/test.json" and info["size"] == 7 and {"modified", "created"} <= set(info)
    r = await client.get(f"/userdata/{enc('workflows/test.json')}")
    assert r.status == 200 and await r.read() == b"1234567"
    r = await client.get("/userdata?dir=workflows&recurse=true&split=false&full_info=true")
    listed = await r.json()
    assert [e["path"] for e in listed] == ["test.json"]
    await client.post(f"/userdata/{enc('workflows/sub/x.json')}", data=b"{}")
    assert await (await client.get("/userdata?dir=workflows&recurse=true")).json() == ["sub/x.json", "test.json"]
    assert await (await client.get("/userdata?dir=workflows")).json() == ["test.json"]
    assert await (await client.get("/userdata?dir=workflows&recurse=true&split=true")).json() == [
        ["sub/x.json", "sub", "x.json"],
        ["test.json", "test.json"],
    ]
    r = await client.post(f"/userdata/{enc('workflows/test.json')}/move/{enc('workflows/b.json')}")
    assert r.status == 200 and await r.json() == "workflows/b.json"
    await client.post(f"/userdata/{enc('workflows/c.json')}", data=b"c")
    r = await client.post(f"/userdata/{enc('workflows/c.json')}/move/{enc('workflows/b.json')}?overwrite=false")
    assert r.status == 409
    r = await client.get("/v2/userdata?path=workflows")
    entries = await r.json()
    assert [(e["name"], e["type"]) for e in entries] == [
        ("sub", "directory"),
        ("b.json", "file"),
        ("c.json", "file"),
        ("x.json", "file"),
    ]
    assert entries[1]["path"] == "workflows/b.json" and entries[1]["size"] == 7
    assert (await client.delete(f"/userdata/{enc('workflows/b.json')}")).status == 204
    assert (await client.delete(f"/userdata/{enc('workflows/b.json')}")).status == 404
    assert (await client.get(f"/userdata/{enc('workflows/gone.json')}")).status == 404


async def test_userdata_listing_errors(client):
    assert (await client.get("/userdata")).status == 400
    assert (await client.get("/userdata?dir=not_written_yet")).status == 404
    assert await (await client.get("/v2/userdata")).json() == []


async def test_userdata_traversal_is_403(client, workspace, tmp_path):
    (tmp_path / "secret.txt").write_text("secret")
    await client.post(f"/userdata/{enc('ok.json')}", data=b"{}")
    attempts = [
        "../../secret.txt",
        "../../../etc/passwd",
        "/etc/passwd",
        "..\\..\\secret.txt",
        "%2e%2e%2f%2e%2e%2fsecret.txt",
        "a/../../../secret.txt",
    ]
    for path in attempts:
        r = await client.get(f"/userdata/{enc(path)}")
        assert r.status in (400, 403), (path, r.status)
        r = await client.post(f"/userdata/{enc(path)}", data=b"pwned")
        assert r.status in (400, 403), (path, r.status)
        r = await client.delete(f"/userdata/{enc(path)}")
        assert r.status in (400, 403), (path, r.status)
        r = await client.post(f"/userdata/{enc('ok.json')}/move/{enc(path)}")
        assert r.status in (400, 403), (path, r.status)
    assert (await client.get("/userdata?dir=../..")).status == 403
    assert (await client.get("/v2/userdata?path=../..")).status == 403
    assert (tmp_path / "secret.txt").read_text() == "secret"
    assert (workspace.user_dir / "default" / "ok.json").exists()


async def test_userdata_symlink_out_is_403(client, workspace, tmp_path):
    import os

    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "s.txt").write_text("s")
    root = workspace.user_dir / "default"
    root.mkdir(parents=True)
    os.symlink(tmp_path / "outside", root / "link")
    assert (await client.get(f"/userdata/{enc('link/s.txt')}")).status == 403
    assert (await client.post(f"/userdata/{enc('link/new.txt')}", data=b"x")).status == 403
    assert not (tmp_path / "outside" / "new.txt").exists()


async def test_settings_roundtrip(client, workspace):
    assert await (await client.get("/api/settings")).json() == {}
    assert await (await client.get("/settings/Comfy.Foo")).json() is None
    assert (await client.post("/settings/Comfy.TutorialCompleted", json=True)).status == 200
    assert (await client.post("/settings", json={"A": 1, "B": "x"})).status == 200
    assert await (await client.get("/settings")).json() == {"Comfy.TutorialCompleted": True, "A": 1, "B": "x"}
    assert await (await client.get("/settings/A")).json() == 1
    assert (workspace.user_dir / "default" / "comfy.settings.json").exists()
    (workspace.user_dir / "default" / "comfy.settings.json").write_text("{corrupt")
    assert await (await client.get("/settings")).json() == {}


async def test_multi_user_header_selects_user_folder(make_client, workspace):
    client = await make_client(multi_user=True)
    body = await (await client.get("/users")).json()
    assert body == {"storage": "server", "users": {}}
    r = await client.post("/users", json={"username": "alice"})
    alice = await r.json()
    assert alice.startswith("alice_")
    assert (await client.post("/users", json={"username": "alice"})).status == 400
    assert (await (await client.get("/users")).json())["users"] == {alice: "alice"}
    h = {"comfy-user": alice}
    await client.post("/settings/X", json=5, headers=h)
    assert await (await client.get("/settings", headers=h)).json() == {"X": 5}
    assert await (await client.get("/settings")).json() == {}  # no header: the default user
    assert (workspace.user_dir / alice / "comfy.settings.json").exists()
    assert (await client.get("/settings", headers={"comfy-user": "mallory"})).status == 401
    assert (await client.get("/userdata?dir=x", headers={"comfy-user": "../x"})).status == 403
