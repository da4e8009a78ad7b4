"""Server-wide routes: /system_stats, /features, /embeddings, /models, /models/{folder}, /extensions,
/i18n, /workflow_templates, /free, /interrupt."""

from __future__ import annotations

import importlib.metadata
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

import psutil
from aiohttp import web

from nodes import progress

from .common import read_json
from .custom_node_files import translations, workflow_templates

if TYPE_CHECKING:
    from .app import PromptServer

log = logging.getLogger(__name__)

# The ComfyUI release whose protocol this server speaks (reported to the web UI and API clients).
COMFYUI_VERSION = "0.3.64"


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _devices(executors: list[dict] | None = None) -> list[dict]:
    """ComfyUI's device list, without creating a CUDA context in the server process (one would take
    device memory and race the executors measuring what is free): GPUs as the executors report them
    (their budgets and use, summed per device), else this process's GPU where it already has a context
    (the in-process runtime on a GPU), else the host."""
    import torch

    devices: dict[str, dict] = {}
    for e in executors or []:
        device = str(e.get("device", ""))
        if not device.startswith("cuda"):
            continue
        d = devices.setdefault(
            device,
            {
                "name": device,
                "type": "cuda",
                "index": int(device.partition(":")[2] or 0),
                "vram_total": 0,
                "vram_free": 0,
                "torch_vram_total": 0,
                "torch_vram_free": 0,
            },
        )
        budget, used = int(e.get("memory_budget", 0)), int(e.get("memory_used", 0))
        d["vram_total"] += budget
        d["vram_free"] += budget - used
        d["torch_vram_total"] += budget
        d["torch_vram_free"] += budget - used
    if not devices and torch.cuda.is_initialized():
        for index in range(torch.cuda.device_count()):
            free, total = torch.cuda.mem_get_info(index)
            reserved = torch.cuda.memory_reserved(index)
            allocated = torch.cuda.memory_allocated(index)
            devices[f"cuda:{index}"] = {
                "name": f"cuda:{index} {torch.cuda.get_device_name(index)}",
                "type": "cuda",
                "index": index,
                "vram_total": total,
                "vram_free": free,
                "torch_vram_total": reserved,
                "torch_vram_free": reserved - allocated,
            }
    if devices:
        return list(devices.values())
    vm = psutil.virtual_memory()
    return [
        {
            "name": "cpu",
            "type": "cpu",
            "index": None,
            "vram_total": vm.total,
            "vram_free": vm.available,
            "torch_vram_total": vm.total,
            "torch_vram_free": vm.available,
        }
    ]


def system_stats(executors: list[dict] | None = None) -> dict:
    """/system_stats; `executors`: the head's reports of its executors (device, memory_budget, memory_used)."""
    import torch

    vm = psutil.virtual_memory()
    frontend = _version("comfyui-frontend-package")
    templates = _version("comfyui-workflow-templates")
    return {
        "system": {
            "os": os.name,
            "ram_total": vm.total,
            "ram_free": vm.available,
            "comfyui_version": COMFYUI_VERSION,
            "required_frontend_version": frontend,
            "installed_templates_version": templates,
            "required_templates_version": templates,
            "python_version": sys.version,
            "pytorch_version": torch.__version__,
            "embedded_python": Path(sys.executable).parent.name == "python_embeded",
            "argv": sys.argv,
        },
        "devices": _devices(executors),
    }


def extension_urls(web_root: Path, web_directories: dict) -> list[str]:
    urls = (
        ["/" + p.relative_to(web_root).as_posix() for p in sorted((web_root / "extensions").rglob("*.js"))]
        if (web_root / "extensions").is_dir()
        else []
    )
    for name, directory in web_directories.items():
        directory = Path(directory)
        if directory.is_dir():
            urls.extend(
                f"/extensions/{quote(name)}/{p.relative_to(directory).as_posix()}"
                for p in sorted(directory.rglob("*.js"))
            )
    return urls


def add_routes(routes: web.RouteTableDef, server: PromptServer) -> None:
    ws = server.workspace

    @routes.get("/system_stats")
    async def get_system_stats(request: web.Request) -> web.Response:
        head = getattr(server.config, "cluster_head", None)
        return web.json_response(system_stats(head.stats()["executors"] if head is not None else None))

    @routes.get("/features")
    async def get_features(request: web.Request) -> web.Response:
        return web.json_response(server.feature_flags())

    @routes.get("/embeddings")
    async def get_embeddings(request: web.Request) -> web.Response:
        return web.json_response([os.path.splitext(name)[0] for name in ws.list_files("embeddings")])

    @routes.get("/models")
    async def list_model_types(request: web.Request) -> web.Response:
        return web.json_response(list(ws.folders.keys()))

    @routes.get("/models/{folder}")
    async def get_models(request: web.Request) -> web.Response:
        folder = request.match_info["folder"]
        if folder not in ws.folders:  # legacy aliases (clip, unet) are not keys here, as in ComfyUI
            return web.Response(status=404)
        return web.json_response(ws.list_files(folder))

    @routes.get("/extensions")
    async def get_extensions(request: web.Request) -> web.Response:
        return web.json_response(extension_urls(server.web_root, getattr(server.registry, "web_directories", {})))

    @routes.get("/i18n")
    async def get_i18n(request: web.Request) -> web.Response:
        return web.json_response(translations(ws))

    @routes.get("/workflow_templates")
    async def get_workflow_templates(request: web.Request) -> web.Response:
        return web.json_response(workflow_templates(ws))

    @routes.post("/free")
    async def post_free(request: web.Request) -> web.Response:
        data = await read_json(request, default={})
        data = data if isinstance(data, dict) else {}
        if data.get("unload_models"):
            server.prompt_queue.set_flag("unload_models", True)
        if data.get("free_memory"):
            server.prompt_queue.set_flag("free_memory", True)
        return web.Response(status=200)

    @routes.post("/interrupt")
    async def post_interrupt(request: web.Request) -> web.Response:
        data = await read_json(request, default={})
        prompt_id = data.get("prompt_id") if isinstance(data, dict) else None
        if prompt_id:
            if prompt_id in server.prompt_queue.running_prompt_ids():
                log.info("Interrupting prompt %s", prompt_id)
                progress.interrupt(prompt_id=prompt_id)
            else:
                log.info("Prompt %s is not currently running, skipping interrupt", prompt_id)
        else:  # scoped: a tenant interrupts only its own running prompts
            for running in server.prompt_queue.running_prompt_ids():
                progress.interrupt(prompt_id=running)
        return web.Response(status=200)
