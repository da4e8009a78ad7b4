"""`pack_node`: one custom node's function run whole, as one invocation, on an executor.

The executor imports the pack by path (the same module name the head uses), activates the head's
workspace so `folder_paths` answers the same, calls the node with real tensors and MODEL/CLIP/VAE
proxies, and returns the pickled result with its tensors and the events the node sent.
"""

from __future__ import annotations

import functools
import inspect
import os
from pathlib import Path
from typing import Any

import blake3
import torch

from cluster.call import Params
from cluster.dataplane.remote import host_id
from cluster.modelfn import ModelFn, register
from cluster.refs import ModelRef
from comfy_bridge.packs import events, node_failure, node_files, transport
from comfy_bridge.packs.origin import PackOrigin, reset_running, set_running
from comfy_bridge.packs.proxies import wrap_inputs
from comfy_bridge.packs.torchvision_ops import make_torchvision_importable
from nodes.core_calls import IN_NODE_CALL
from nodes.workspace import activate_snapshot, active

RESULT = "result"

# An executor imports its providers (this one among them) before it warms the SD model code up, which imports
# diffusers, whose LoRA loader imports transformers' image utilities, which import an installed torchvision: one
# built for another torch (PyPI's CUDA wheel beside a CPU torch) killed every executor at start, so `serve` never
# became ready. The server process declares its op schemas before the core nodes load; an executor does it here.
make_torchvision_importable()


def workspace_snapshot() -> dict[str, Any]:
    """The head's active workspace as plain data, to activate the same one on an executor."""
    return active().snapshot()


def _activate(snapshot: dict[str, Any], head_host: str | None) -> None:
    """The head's workspace on the head's host; an executor on another machine keeps its own
    (`comfy-cluster executor --workspace`), whose folders hold its copies of the models and packs."""
    if _on_heads_host(head_host):
        activate_snapshot(snapshot)


def _on_heads_host(head_host: str | None) -> bool:
    return head_host in (None, host_id())


def pack_source_digest(path: str | Path) -> str:
    """BLAKE3 over a pack's Python sources (their names within it and their bytes): the code its nodes run,
    compared between the head and an executor on another machine. Read again only when a file changed."""
    path = Path(path)
    files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
    named = tuple((f.relative_to(path).as_posix() if path.is_dir() else f.name, str(f)) for f in files)
    stamps = tuple((st.st_size, st.st_mtime_ns) for st in map(os.stat, files))
    return _sources_digest(named, stamps)


@functools.lru_cache(maxsize=256)
def _sources_digest(named: tuple[tuple[str, str], ...], stamps: tuple) -> str:
    h = blake3.blake3()
    for name, file in named:
        h.update(name.encode())
        h.update(Path(file).read_bytes())
    return h.hexdigest()


def _pack_here(origin: PackOrigin, digest: str | None) -> Path:
    """Where this machine has the pack the head loaded from `origin.path`: that path, or on another machine a
    pack of the same name in this workspace's custom_nodes holding the same code."""
    if os.path.exists(origin.path):
        return Path(origin.path)
    folders = active().folder_paths("custom_nodes")
    for folder in folders:
        candidate = folder / Path(origin.path).name
        if candidate.exists():
            if digest and pack_source_digest(candidate) != digest:
                raise ValueError(
                    f"node pack {origin.pack!r} on this machine ({candidate}) is not the head's: its "
                    "Python sources differ; install the same version on every node"
                )
            return candidate
    raise FileNotFoundError(
        f"node pack {origin.pack!r} is not installed on this machine: install it in "
        f"{', '.join(map(str, folders))} as on the head ({origin.path})"
    )


def _node_class(origin: PackOrigin, digest: str | None = None) -> type:
    from comfy_bridge.custom_nodes import pack_classes
    from comfy_bridge.registry import run_coroutine_sync

    classes = run_coroutine_sync(pack_classes(_pack_here(origin, digest)))
    try:
        cls = classes[origin.node_id]
    except KeyError:
        raise KeyError(f"node pack {origin.pack!r} no longer defines {origin.node_id!r}") from None
    if cls not in _INPUT_TYPES_ASKED and callable(getattr(cls, "INPUT_TYPES", None)):
        # ComfyUI asks INPUT_TYPES while it validates, in the process that then runs the node, and some
        # packs keep what it loads on the class (portrait-master's lists): ask once here as well.
        cls.INPUT_TYPES()
        _INPUT_TYPES_ASKED.add(cls)
    return cls


_INPUT_TYPES_ASKED: set[type] = set()


def call_node(cls: type, function: str, kwargs: dict[str, Any], hidden: dict | None) -> Any:
    """Instantiate (V1) or clone (V3) the node and call its function; coroutines are run to the end."""
    from comfy_bridge.execution.nodeapi import bound_function, is_v3

    obj = cls if is_v3(cls) else cls()
    result = bound_function(obj, function, hidden)(**wrap_inputs(kwargs))
    if inspect.isawaitable(result):
        from comfy_bridge.registry import run_coroutine_sync

        async def wait() -> Any:
            return await result

        result = run_coroutine_sync(wait())
    return result


def _owned(t: torch.Tensor | None) -> torch.Tensor | None:
    return None if t is None else t.clone()


class PackNodeParams(Params):
    origin: PackOrigin  # which pack and node class (a pack's own object: the call's opaque objects)
    function: str  # the class's FUNCTION
    args: bytes  # the node's kwargs and hidden inputs, by the packs' transport (tensors travel as inputs)
    ids: dict[str, Any]  # node_id, prompt_id, client_id: for the events it sends
    workspace: dict[str, Any]  # the head's active workspace (workspace_snapshot)
    host_id: str | None = None  # the head's host (cluster.dataplane.remote.host_id)
    pack_digest: str | None = None  # the pack's source as the head loaded it


@register
class PackNodeFn(ModelFn):
    """params: a PackNodeParams; inputs: the argument tensors. Output `result`: the pickled (result, events, files: those its
    result names, read on a machine other than the head's, raised: what the node raised or None); `t.*`: its
    tensors."""

    name = "pack_node"
    Params = PackNodeParams

    def setup_io(self) -> None:
        self.add_input("args")
        self.add_output(RESULT)

    def load_model(self, ref: ModelRef) -> None:
        return None

    def execute(self, model: Any, inputs: dict[str, Any], params: PackNodeParams) -> dict[str, torch.Tensor]:
        from comfy_bridge import compat

        compat.install()
        _activate(params.workspace, params.host_id)
        origin = params.origin
        # Pack code may keep its inputs (caches, globals): give it copies, not views into the arena,
        # whose blocks are reused once this call ends.
        arguments = {k: _owned(self.resolve(inputs, k)) for k in inputs}
        result, recorded, raised = None, [], None
        token, in_node = set_running(origin), IN_NODE_CALL.set(True)  # core node calls return their results
        try:
            cls = _node_class(origin, params.pack_digest)
            kwargs, hidden = transport.loads(params.args, arguments)
            with events.recording(params.ids) as recorded:
                result = call_node(cls, params.function, kwargs, hidden)
        except Exception as e:  # the pack's own failure: the head raises it as the node's (node_failure)
            raised = node_failure.capture(e)
        finally:
            reset_running(token)
            IN_NODE_CALL.reset(in_node)
        files = {} if raised or _on_heads_host(params.host_id) else node_files.read_named(result, active())
        blob, tensors = transport.dumps((result, recorded, files, raised))
        return {RESULT: transport.bytes_to_tensor(blob), **tensors}
