"""/api/jobs as today's ComfyUI answers it (comfy_execution/jobs.py and server.py of its newest source):
a text node's output is the job's preview when it has nothing else to show, 3D files named by a bare
string are file items in a job's outputs, an absent `limit` is a null in `pagination`, and a bad `offset`
is a 400 that names `offset`."""

from __future__ import annotations

from comfy_bridge.server.jobs import detail_outputs, outputs_summary

from .conftest import make_registry, wait_history


class StubShowText:
    """Shows its text in the UI, as PreviewAny and TextGenerate's preview do (`{"ui": {"text": [...]}}`)."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"text": ("STRING", {"default": ""})}}

    RETURN_TYPES = ()
    OUTPUT_NODE = True
    FUNCTION = "run"
    CATEGORY = "test"

    def run(self, text):
        return {"ui": {"text": [text]}}


def test_text_output_is_the_preview_when_nothing_else_is():
    count, previewable, preview = outputs_summary({"7": {"text": ["a cat on a mat"]}})
    assert (count, previewable) == (0, 0)  # text is preview material, not an output file
    assert preview == {"content": "a cat on a mat", "nodeId": "7", "mediaType": "text"}
    long = outputs_summary({"7": {"text": ["x" * 1500]}})[2]
    assert long["content"] == "x" * 1024 and long["truncated"] is True


def test_visual_output_outranks_text():
    image = {"filename": "a.png", "subfolder": "", "type": "output"}
    count, previewable, preview = outputs_summary({"1": {"text": ["hello"]}, "2": {"images": [image]}})
    assert (count, previewable) == (1, 1)
    assert preview == {**image, "nodeId": "2", "mediaType": "images"}


def test_detail_outputs_list_3d_files_as_file_items():
    outputs = {"3": {"result": ["mesh.glb", None, "note"], "animated": [False]}, "4": "odd"}
    assert detail_outputs(outputs) == {
        "3": {
            "result": [{"filename": "mesh.glb", "type": "output", "subfolder": "", "mediaType": "3d"}, "note"],
            "animated": [False],
        },
        "4": "odd",
    }


async def test_text_job_preview_and_pagination_through_the_route(make_client):
    client = await make_client(make_registry({"StubShowText": StubShowText}))
    prompt = {"1": {"class_type": "StubShowText", "inputs": {"text": "a prompt, expanded"}}}
    assert (await client.post("/prompt", json={"prompt": prompt, "prompt_id": "t1"})).status == 200
    await wait_history(client, "t1")
    body = await (await client.get("/api/jobs?status=completed")).json()
    job = body["jobs"][0]
    assert job["id"] == "t1" and job["outputs_count"] == 0
    assert job["preview_output"] == {"content": "a prompt, expanded", "nodeId": "1", "mediaType": "text"}
    assert body["pagination"] == {"offset": 0, "limit": None, "total": 1, "has_more": False}
    paged = await (await client.get("/api/jobs?limit=5&offset=0")).json()
    assert paged["pagination"]["limit"] == 5
    r = await client.get("/api/jobs?offset=first")
    assert r.status == 400 and (await r.json()) == {"error": "offset must be an integer"}
    r = await client.get("/api/jobs?limit=ten")
    assert r.status == 400 and (await r.json()) == {"error": "limit must be an integer"}
