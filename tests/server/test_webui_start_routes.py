"""What the web UI asks for at every start, answered on a fresh workspace: its standard user folders,
the user's stylesheet and node templates, custom node subgraph blueprints, and the core workflow templates."""

import json

import pytest

from comfy_bridge.server import templates


async def test_standard_user_folders_list_empty_until_written(client):
    for folder in ("workflows", "subgraphs"):
        r = await client.get(f"/api/userdata?dir={folder}&recurse=true&split=false&full_info=true")
        assert r.status == 200 and await r.json() == []
    r = await client.get("/api/userdata?dir=not_a_folder")
    assert r.status == 404 and await r.text() == "Directory not found"  # any other folder: as ComfyUI


async def test_user_css_and_node_templates_default_when_absent(client, workspace):
    r = await client.get("/user.css")
    assert r.status == 200 and r.headers["Content-Type"].startswith("text/css") and await r.read() == b""
    r = await client.get("/api/userdata/user.css")
    assert r.status == 200 and r.headers["Content-Type"].startswith("text/css") and await r.read() == b""
    r = await client.get("/api/userdata/comfy.templates.json")
    assert r.status == 200 and await r.json() == []
    # A file the user wrote is served as it is.
    assert (await client.post("/api/userdata/user.css", data=b"body{color:red}")).status == 200
    r = await client.get("/api/userdata/user.css")
    assert r.headers["Content-Type"].startswith("text/css") and await r.read() == b"body{color:red}"
    assert (await client.get("/api/userdata/other.css")).status == 404


async def test_global_subgraphs_from_custom_node_packs(client, workspace):
    assert await (await client.get("/api/global_subgraphs")).json() == {}
    folder = workspace.root / "custom_nodes" / "my_pack" / "subgraphs"
    folder.mkdir(parents=True)
    (folder / "Upscale Twice.json").write_text('{"nodes": []}')
    listed = await (await client.get("/api/global_subgraphs")).json()
    [(key, entry)] = listed.items()
    assert entry == {"source": "custom_node", "name": "Upscale Twice", "info": {"node_pack": "my_pack"}}
    one = await (await client.get(f"/api/global_subgraphs/{key}")).json()
    assert one["data"] == '{"nodes": []}' and one["name"] == "Upscale Twice"
    assert (await client.get("/api/global_subgraphs/unknown")).status == 404


@pytest.mark.skipif(not templates.asset_files(), reason="comfyui-workflow-templates-json is not installed")
async def test_core_templates_index_and_workflows(client):
    r = await client.get("/templates/index.json")
    assert r.status == 200 and r.headers["Content-Type"].startswith("application/json")
    index = await r.json()
    names = [t["name"] for category in index for t in category["templates"]]
    assert len(names) > 50
    r = await client.get(f"/templates/{names[0]}.json")
    assert r.status == 200 and "nodes" in json.loads(await r.read())
    assert (await client.get("/templates/index_logo.json")).status == 200
    assert (await client.get("/api/templates/index.json")).status == 404  # not under /api, as ComfyUI
    assert (await client.get("/templates/..%2Fpyproject.toml")).status == 404
    thumbnail = f"{names[0]}-1.{index[0]['templates'][0]['mediaSubtype']}"
    if thumbnail in templates.asset_files():  # the media bundles (the `templates` extra) are installed
        r = await client.get(f"/templates/{thumbnail}")
        assert r.status == 200 and r.headers["Content-Type"].startswith("image/")
