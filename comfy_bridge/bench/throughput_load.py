"""The prompts of `bench throughput` and the client that sends them, the same for Comfy Cluster and ComfyUI.

The mixed load cycles three workflows (the default SD1 text-to-image, the same at a wider resolution,
image-to-image from an uploaded picture) and two samplers (euler/normal, dpmpp_2m/karras), each prompt
with its own seed and its tenant's own text; prompts go to tenants in turn. A client posts every prompt
at once, each tenant through its own websocket (the end of a prompt is its `execution_success` there, as
the web UI sees it), then reads the images back and hashes their decoded pixels.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

REPO = Path(__file__).resolve().parents[2]
SAMPLERS = (("euler", "normal"), ("dpmpp_2m", "karras"))
WORKFLOWS = ("txt2img", "txt2img-wide", "img2img")
INPUT_IMAGE = "throughput-input.png"
TEXTS = (
    "beautiful scenery nature glass bottle landscape, purple galaxy bottle",
    "a lighthouse on a cliff at dawn, oil painting",
    "a red fox in fresh snow, photograph",
    "an old city street in the rain, neon signs",
    "a bowl of ripe fruit on a wooden table, still life",
)


@dataclass(frozen=True)
class Side:
    """A server under load: its address and one API key per tenant ("": none, as ComfyUI takes)."""

    name: str
    base: str
    keys: tuple[str, ...]
    admin_key: str = ""


@dataclass
class Load:
    """What one batch of prompts measured: per prompt (in the order given) its tenant, id and times."""

    records: list[dict] = field(default_factory=list)

    @property
    def makespan_s(self) -> float:
        return max(r["ended"] for r in self.records) - min(r["submitted"] for r in self.records)

    @property
    def latencies_s(self) -> list[float]:
        return [r["ended"] - r["submitted"] for r in self.records]


def prompt_for(index: int, seed: int, tenant: int, checkpoint: str, size: int, steps: int) -> dict:
    """Prompt `index` of a load: its workflow and sampler follow from the index, its text from the tenant."""
    workflow = WORKFLOWS[index % len(WORKFLOWS)]
    sampler, scheduler = SAMPLERS[index % len(SAMPLERS)]
    name = "img2img" if workflow == "img2img" else "text_to_image"
    prompt = json.loads((REPO / "workflows_json" / f"{name}.json").read_text())
    prompt["4"]["inputs"]["ckpt_name"] = checkpoint
    prompt["6"]["inputs"]["text"] = TEXTS[tenant % len(TEXTS)]
    prompt["3"]["inputs"].update(seed=seed, steps=steps, sampler_name=sampler, scheduler=scheduler)
    prompt["9"]["inputs"]["filename_prefix"] = f"throughput_{workflow}"
    if workflow == "img2img":
        prompt["10"]["inputs"]["image"] = INPUT_IMAGE
    else:
        wide = workflow == "txt2img-wide"
        prompt["5"]["inputs"].update(width=size * 3 // 2 // 8 * 8 if wide else size, height=size)
    return prompt


def mixed_load(
    prompts: int, tenants: int, first_seed: int, checkpoint: str, size: int, steps: int
) -> list[tuple[int, dict]]:
    """`prompts` (tenant, prompt) pairs: tenants in turn, seeds first_seed, first_seed + 1, ..."""
    return [(i % tenants, prompt_for(i, first_seed + i, i % tenants, checkpoint, size, steps)) for i in range(prompts)]


def input_png(size: int) -> bytes:
    """The image-to-image input: a fixed colour gradient, so every side starts from the same pixels."""
    import numpy as np
    from PIL import Image

    ys, xs = np.mgrid[0:size, 0:size] * 255 // max(1, size - 1)
    pixels = np.stack([xs, ys, 255 - xs], -1).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return out.getvalue()


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


async def _check(resp: aiohttp.ClientResponse, what: str) -> dict:
    body = await resp.read()
    if resp.status != 200:
        raise RuntimeError(f"{what}: HTTP {resp.status}: {body[:500].decode(errors='replace')}")
    return json.loads(body)


async def _upload(side: Side, png: bytes) -> None:
    async with aiohttp.ClientSession() as http:
        for key in dict.fromkeys(side.keys):  # each tenant has its own input folder on a hosted server
            form = aiohttp.FormData()
            form.add_field("image", png, filename=INPUT_IMAGE, content_type="image/png")
            form.add_field("overwrite", "true")
            async with http.post(f"{side.base}/upload/image", data=form, headers=_auth(key)) as r:
                await _check(r, f"{side.name}: uploading {INPUT_IMAGE}")


def upload_input(side: Side, size: int) -> None:
    """Put the image-to-image input into every tenant's input folder on `side`."""
    asyncio.run(_upload(side, input_png(size)))


async def _run(side: Side, items: list[tuple[int, dict]], timeout_s: float) -> Load:
    ended: dict[str, tuple[float, dict]] = {}
    changed = asyncio.Event()
    tenants = sorted({t for t, _ in items})
    clients = {t: uuid.uuid4().hex for t in tenants}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None)) as http:
        sockets = {
            t: await http.ws_connect(f"{side.base}/ws?clientId={clients[t]}", headers=_auth(side.keys[t]))
            for t in tenants
        }

        async def listen(ws: aiohttp.ClientWebSocketResponse) -> None:
            async for msg in ws:
                if msg.type != aiohttp.WSMsgType.TEXT:
                    continue
                event = json.loads(msg.data)
                if event.get("type") in ("execution_success", "execution_error", "execution_interrupted"):
                    ended[event["data"]["prompt_id"]] = (time.perf_counter(), event)
                    changed.set()

        listeners = [asyncio.create_task(listen(ws)) for ws in sockets.values()]

        async def post(tenant: int, prompt: dict) -> dict:
            submitted = time.perf_counter()
            body = {"prompt": prompt, "client_id": clients[tenant]}
            async with http.post(f"{side.base}/prompt", json=body, headers=_auth(side.keys[tenant])) as r:
                answer = await _check(r, f"{side.name}: POST /prompt")
            return {"tenant": tenant, "prompt_id": answer["prompt_id"], "submitted": submitted}

        try:
            records = await asyncio.gather(*(post(t, p) for t, p in items))
            deadline = time.perf_counter() + timeout_s
            while not all(r["prompt_id"] in ended for r in records):
                changed.clear()
                left = deadline - time.perf_counter()
                if left <= 0:
                    raise TimeoutError(f"{side.name}: prompts unfinished after {timeout_s:.0f} s")
                await asyncio.wait_for(changed.wait(), left)
        finally:
            for task in listeners:
                task.cancel()
            for ws in sockets.values():
                await ws.close()
    for record in records:
        at, event = ended[record["prompt_id"]]
        if event["type"] != "execution_success":
            raise RuntimeError(f"{side.name}: prompt {record['prompt_id']} failed: {event}")
        record["ended"] = at
    return Load(records)


def run_load(side: Side, items: list[tuple[int, dict]], timeout_s: float = 1800.0) -> Load:
    """Post every (tenant, prompt) of `items` at once and wait for all of them to end."""
    return asyncio.run(_run(side, items, timeout_s))


def pixel_hash(png: bytes) -> str:
    """The decoded pixels' hash: PNG bytes differ with their metadata and compression, pixels do not."""
    from PIL import Image

    image = Image.open(io.BytesIO(png))
    return hashlib.sha256(f"{image.mode}{image.size}".encode() + image.tobytes()).hexdigest()[:16]


async def _history(
    http: aiohttp.ClientSession, side: Side, prompt_id: str, headers: dict, timeout_s: float = 30.0
) -> dict:
    """The prompt's history entry. A server tells its websocket that a prompt ended before the entry is stored
    (ComfyUI's worker stores it after execute returns), so it is asked again until the entry is there."""
    deadline = time.monotonic() + timeout_s
    while True:
        async with http.get(f"{side.base}/history/{prompt_id}", headers=headers) as r:
            found = await _check(r, f"{side.name}: GET /history")
        if prompt_id in found:
            return found[prompt_id]
        if time.monotonic() > deadline:
            raise RuntimeError(f"{side.name}: prompt {prompt_id} ended but has no history entry after {timeout_s:g} s")
        await asyncio.sleep(0.1)


async def _images(side: Side, load: Load) -> list[list[str]]:
    hashes = []
    async with aiohttp.ClientSession() as http:
        for record in load.records:
            headers = _auth(side.keys[record["tenant"]])
            history = await _history(http, side, record["prompt_id"], headers)
            files = [img for out in history["outputs"].values() for img in out.get("images", [])]
            found = []
            for image in files:
                params = {k: image.get(k, "") for k in ("filename", "subfolder", "type")}
                async with http.get(f"{side.base}/view", params=params, headers=headers) as r:
                    if r.status != 200:
                        raise RuntimeError(f"{side.name}: GET /view {params}: HTTP {r.status}")
                    found.append(pixel_hash(await r.read()))
            hashes.append(found)
    return hashes


def image_hashes(side: Side, load: Load) -> list[list[str]]:
    """Per prompt of `load`, the pixel hashes of the images it saved."""
    return asyncio.run(_images(side, load))


def get_json(side: Side, path: str) -> dict:
    async def get() -> dict:
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{side.base}{path}", headers=_auth(side.admin_key)) as r:
                return await _check(r, f"{side.name}: GET {path}")

    return asyncio.run(get())
