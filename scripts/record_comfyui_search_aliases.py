"""Record the search aliases of upstream ComfyUI 0.10.0's core node classes (the names the web UI's node search
also finds a node by: "txt2img" finds KSampler) into nodes/library/search_aliases.json, which the core nodes
here report in /object_info.

Run inside ComfyUI 0.10.0's own environment (commit 79cdbc81 of hiddenswitch/ComfyUI; it imports ComfyUI's
modules, nothing of ComfyUI's code is copied here; recipe in ../shared/reference/running-real-comfyui.md):

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim> <venv>/bin/python \\
        /work/main/scripts/record_comfyui_search_aliases.py /work/main/nodes/library/search_aliases.json

A plain class's aliases are its SEARCH_ALIASES, a V3 node's those of its schema, as 0.10.0's server reports them.
Classes whose module fails to import there (the audio nodes: no torchaudio for the CPU torch) are not recorded.
"""

from __future__ import annotations

import asyncio
import json
import sys

SOURCE = (
    "Search aliases of ComfyUI 0.10.0's core node classes (upstream commit 79cdbc81, as its /object_info reports"
    " them), recorded by scripts/record_comfyui_search_aliases.py. A class here that declares SEARCH_ALIASES itself"
    " (read from the newest ComfyUI source) reports its own."
)


def record() -> dict[str, list[str]]:
    sys.argv = [sys.argv[0], "--cpu"]
    sys.path.insert(0, ".")
    import comfy.options

    comfy.options.enable_args_parsing()
    import utils.install_util  # noqa: F401  (first: comfy/ on the path later shadows the utils package)

    import nodes

    asyncio.run(nodes.init_extra_nodes(init_custom_nodes=False, init_api_nodes=False))
    out = {}
    for name, cls in sorted(nodes.NODE_CLASS_MAPPINGS.items()):
        if hasattr(cls, "GET_NODE_INFO_V1"):
            aliases = cls.GET_NODE_INFO_V1().get("search_aliases")
        else:
            aliases = getattr(cls, "SEARCH_ALIASES", [])
        if aliases:
            out[name] = list(aliases)
    return out


if __name__ == "__main__":
    path = sys.argv[1]
    with open(path, "w") as f:
        json.dump({"source": SOURCE, "classes": record()}, f, indent=1)
        f.write("\n")
