"""POST /prompt and GET /prompt: ComfyUI's request/response shapes and error handling."""

import json

from .conftest import simple_prompt, wait_history


async def test_post_prompt_returns_id_number_and_node_errors(client):
    r = await client.post("/prompt", json={"prompt": simple_prompt(), "client_id": "c1"})
    assert r.status == 200
    body = await r.json()
    assert set(body) == {"prompt_id", "number", "node_errors"}
    assert body["number"] == 0 and body["node_errors"] == {}
    entry = await wait_history(client, body["prompt_id"])
    assert entry["status"]["status_str"] == "success"


async def test_numbers_count_up_front_negates_and_explicit_number_is_float(client):
    numbers = []
    for extra in ({}, {}, {"front": True}, {"number": 5}):
        r = await client.post("/api/prompt", json={"prompt": simple_prompt(), **extra})
        numbers.append((await r.json())["number"])
    assert numbers == [0, 1, -2, 5.0]
    assert isinstance(numbers[3], float)


async def test_prompt_json_accepted_whatever_the_content_type(client):
    r = await client.post(
        "/prompt", data=json.dumps({"prompt": simple_prompt()}), headers={"Content-Type": "text/plain"}
    )
    assert r.status == 200


async def test_client_prompt_id_is_used(client):
    r = await client.post("/prompt", json={"prompt": simple_prompt(), "prompt_id": "my-id"})
    assert (await r.json())["prompt_id"] == "my-id"
    await wait_history(client, "my-id")


async def test_missing_prompt_is_no_prompt_400(client):
    r = await client.post("/prompt", json={"client_id": "x"})
    assert r.status == 400
    assert await r.json() == {
        "error": {
            "type": "no_prompt",
            "message": "No prompt provided",
            "details": "No prompt provided",
            "extra_info": {},
        },
        "node_errors": {},
    }


async def test_invalid_prompt_is_400_with_validator_errors_and_never_runs(client):
    r = await client.post("/prompt", json={"prompt": {"1": {"class_type": "Nope", "inputs": {}}}})
    assert r.status == 400
    body = await r.json()
    assert body["error"]["type"] == "invalid_prompt" and body["node_errors"] == {}
    bad = simple_prompt()
    bad["1"]["inputs"]["width"] = 0
    r = await client.post("/prompt", json={"prompt": bad, "prompt_id": "bad"})
    body = await r.json()
    assert r.status == 400
    assert body["node_errors"]["1"]["errors"][0]["extra_info"]["input_name"] == "width"
    r = await client.get("/history/bad")
    assert await r.json() == {}
    assert (await (await client.get("/queue")).json())["queue_pending"] == []


async def test_bad_json_is_400_error_shape_and_server_keeps_serving(client):
    for body in (b"{not json", b"\xff\xfe", b"[1, 2]", b'"just a string"'):
        r = await client.post("/prompt", data=body)
        assert r.status == 400, body
        err = await r.json()
        assert set(err) == {"error", "node_errors"} and set(err["error"]) == {
            "type",
            "message",
            "details",
            "extra_info",
        }
    for path in ("/queue", "/history", "/settings"):
        r = await client.post(path, data=b"{broken")
        assert r.status == 400, path
    r = await client.get("/prompt")
    assert r.status == 200


async def test_ten_megabyte_prompt_is_413_by_default_and_accepted_with_the_limits_raised(client, make_client):
    prompt = simple_prompt()
    prompt["1"]["inputs"]["padding"] = "x" * (10 * 1024 * 1024)
    r = await client.post("/prompt", json={"prompt": prompt})
    assert r.status == 413 and (await r.json())["error"]["extra_info"]["limit"] == "max_prompt_bytes"
    roomy = await make_client(max_prompt_bytes=None, max_text_chars=None)
    r = await roomy.post("/prompt", json={"prompt": prompt})
    assert r.status == 200
    entry = await wait_history(roomy, (await r.json())["prompt_id"])
    assert len(entry["prompt"][2]["1"]["inputs"]["padding"]) == 10 * 1024 * 1024


async def test_prompt_body_and_text_limits_are_413_naming_the_limit(make_client):
    from comfy_bridge.server.config import DEFAULT_MAX_TEXT_CHARS

    client = await make_client()
    for length, status in ((DEFAULT_MAX_TEXT_CHARS, 200), (DEFAULT_MAX_TEXT_CHARS + 1, 413)):
        prompt = simple_prompt()
        prompt["2"]["inputs"]["filename_prefix"] = "p" * length
        r = await client.post("/prompt", json={"prompt": prompt})
        assert r.status == status
    body = await r.json()
    assert body["error"]["extra_info"] == {"limit": "max_text_chars", "allowed": DEFAULT_MAX_TEXT_CHARS}
    assert "max_text_chars" in body["error"]["message"] and "node 2" in body["error"]["message"]
    small = await make_client(max_prompt_bytes=600, max_text_chars=50)
    nested = simple_prompt()
    nested["1"]["inputs"]["deep"] = [[{"k": "q" * 51}]]  # strings inside lists and objects count too
    r = await small.post("/prompt", json={"prompt": nested})
    assert r.status == 413 and (await r.json())["error"]["extra_info"]["limit"] == "max_text_chars"
    r = await small.post("/prompt", json={"prompt": simple_prompt(), "extra_data": {"pad": "y" * 600}})
    assert r.status == 413 and (await r.json())["error"]["extra_info"]["limit"] == "max_prompt_bytes"
    assert (await small.post("/prompt", json={"prompt": simple_prompt()})).status == 200


async def test_sensitive_extra_data_reaches_the_node_but_not_queue_or_history(client):
    prompt = {**simple_prompt(), "3": {"class_type": "StubKeyCheck", "inputs": {"images": ["1", 0]}}}
    r = await client.post(
        "/prompt", json={"prompt": prompt, "client_id": "c9", "extra_data": {"api_key_comfy_org": "secret", "keep": 1}}
    )
    pid = (await r.json())["prompt_id"]
    entry = await wait_history(client, pid)
    stored = entry["prompt"][3]
    assert "api_key_comfy_org" not in stored and stored["keep"] == 1 and stored["client_id"] == "c9"
    assert isinstance(stored["create_time"], int)
    # the node's hidden API_KEY_COMFY_ORG input received it (the node reports only whether it did)
    assert entry["outputs"]["3"] == {"key_seen": [True]}
    assert "secret" not in json.dumps(entry)


async def test_on_prompt_handlers_can_rewrite_the_request(client):
    from comfy_bridge.server import PromptServer

    def handler(body):
        body["prompt_id"] = "rewritten"
        return body

    def broken(body):
        raise ValueError("ignored")

    PromptServer.instance.add_on_prompt_handler(handler)
    PromptServer.instance.add_on_prompt_handler(broken)
    r = await client.post("/prompt", json={"prompt": simple_prompt()})
    assert (await r.json())["prompt_id"] == "rewritten"


async def test_unusable_model_file_is_400_naming_node_and_input_and_the_server_keeps_serving(make_client, workspace):
    """A truncated checkpoint is refused at POST /prompt (ComfyUI's node_errors shape), never queued; the next
    prompt is served as usual."""
    import torch
    from safetensors.torch import save

    from nodes.loaders import CheckpointLoaderSimple

    from .conftest import make_registry

    (workspace.models_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
    whole = save({"model.diffusion_model.input_blocks.0.0.weight": torch.zeros(4, 4, 3, 3)})
    (workspace.models_dir / "checkpoints" / "cut.safetensors").write_bytes(whole[:-100])

    class TakeModel:
        @classmethod
        def INPUT_TYPES(cls):
            return {"required": {"model": ("MODEL",)}}

        RETURN_TYPES = ()
        FUNCTION = "run"
        OUTPUT_NODE = True

    client = await make_client(
        make_registry({"CheckpointLoaderSimple": CheckpointLoaderSimple, "TakeModel": TakeModel})
    )
    bad = {
        "9": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "cut.safetensors"}},
        "10": {"class_type": "TakeModel", "inputs": {"model": ["9", 0]}},
    }
    r = await client.post("/prompt", json={"prompt": bad, "prompt_id": "bad"})
    assert r.status == 400
    body = await r.json()
    (reason,) = body["node_errors"]["9"]["errors"]
    assert body["node_errors"]["9"]["class_type"] == "CheckpointLoaderSimple"
    assert reason["extra_info"] == {"input_name": "ckpt_name"} and "file is truncated" in reason["details"]
    assert (await (await client.get("/history/bad")).json()) == {}
    r = await client.post("/prompt", json={"prompt": simple_prompt(), "prompt_id": "good"})
    assert r.status == 200
    assert (await wait_history(client, "good"))["status"]["status_str"] == "success"
