"""The default workflow (text_to_image.json on the demo SD checkpoint) through the official Comfy API v2
client (comfy-sdk's synchronous `Comfy`) against `comfy-cluster serve`: the event stream carries one
progress snapshot per denoising step of the KSampler, the output is the generated image, and the job
reads back as succeeded with its executed graph."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import pytest
from comfy_sdk import Comfy
from comfy_sdk.events import OutputReady, Progress, StatusChange
from PIL import Image

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def server(serve):
    return serve("--executors", "0")


def test_default_workflow_through_the_official_client(server, monkeypatch):
    monkeypatch.setenv("COMFY_BASE_URL", server)
    monkeypatch.delenv("COMFY_API_KEY", raising=False)  # a single-user server on loopback takes no key
    graph = json.loads((REPO / "workflows_json" / "text_to_image.json").read_text())
    with Comfy() as client:
        wf = client.workflows.from_json(graph)
        wf.set_input("3", "seed", int(time.time() * 1000) % 100000)  # a seed no earlier run cached
        wf.set_input("3", "steps", 4)
        wf.set_input("5", "width", 64)
        wf.set_input("5", "height", 64)
        job = client.submit(wf)
        events = list(job.events())
        assert [e.status for e in events if isinstance(e, StatusChange)][-1] == "succeeded"
        steps = [(e.step, e.steps) for e in events if isinstance(e, Progress) and e.current_node == "3" and e.steps]
        assert steps == [(1, 4), (2, 4), (3, 4), (4, 4)], steps  # one per denoising step
        values = [e.value for e in events if isinstance(e, Progress)]
        assert values == sorted(values)
        streamed = [e.output.id for e in events if isinstance(e, OutputReady)]

        done = client.jobs.get(job.id).result()
        (output,) = done.get_outputs("9")
        assert streamed == [output.id] and output.type == "image" and output.content_type == "image/png"
        with Image.open(io.BytesIO(output.to_bytes())) as image:
            assert image.size == (64, 64)
            assert len(image.convert("RGB").getcolors(64 * 64)) > 16  # a generated picture, not a flat fill
        assert done.get_workflow().graph["3"]["inputs"]["steps"] == 4
