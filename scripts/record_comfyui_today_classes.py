"""Which classes are today's local core ComfyUI classes: the list docs/nodes.md counts against (issue 34).

Today's core classes are the folders of ComfyUI's node documentation package `comfyui-embedded-docs` 0.5.15
(one per class, paid API nodes included). Left out: the paid API nodes, which are
  - every `node_id` declared in upstream ComfyUI 0.10.0's `comfy_api_nodes/` (the newest ComfyUI we can run), and
  - for classes newer than 0.10.0, those whose name is a paid provider's (`API_PROVIDERS` below: the providers of
    0.10.0's `comfy_api_nodes` files and the ones added since, read from the class names of the docs package);
and the types the web UI draws itself (Note, MarkdownNote, Reroute). Run with the wheel and 0.10.0's source:

    pip download comfyui-embedded-docs==0.5.15 --no-deps -d /tmp/ed
    python scripts/record_comfyui_today_classes.py /tmp/ed/comfyui_embedded_docs-0.5.15-py3-none-any.whl \\
        <ComfyUI 0.10.0 source> > tests/nodes/fixtures/comfyui_today_classes.json
"""

from __future__ import annotations

import json
import re
import sys
import zipfile
from pathlib import Path

FRONTEND_ONLY = {"Note", "MarkdownNote", "Reroute"}
# Name patterns of paid API nodes newer than 0.10.0. Local look-alikes are kept out on purpose: the Tripo splat
# nodes (TripoSplat*, VAEDecodeTripoSplat) and Ideogram4Scheduler run local models; Flux3LayoutPrompt and
# FluxKVCache are local Flux nodes.
API_PROVIDERS = re.compile(
    r"^(Beeble|Bria|BuildJsonPromptIdeogram|ByteDance|Clarity|Claude|ComfyCloud|ElevenLabs|FishAudio|Gemini|Grok|"
    r"HappyHorse|HeyGen|Higgsfield|HitPaw|Ideogram(?!4Scheduler)|Kling|Krea[23](Image|StyleReference)Node|Ltx[A-Z]|"
    r"Luma|Magnific|Meshy|MetaMuse|Minimax|Mirelo|OpenAI|OpenRouter|Pixverse|Pruna|Quiver|Recraft|Reve|Rodin|Runway|"
    r"Sonilo|Sync|Tencent|Topaz|Tripo(?!Splat)|Veed|Vidu)"
    r"|Api$"
    r"|^Flux(2|2Max|2Pro|3|3Max|KontextMax|KontextPro|Erase|VTO|Video)(Image|TextToVideo|ImageToVideo|"
    r"VideoContinuation|Edit|Upscale)?Node$"
)


def docs_classes(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as zf:
        return {
            parts[2]
            for name in zf.namelist()
            if len(parts := name.split("/")) > 3 and parts[:2] == ["comfyui_embedded_docs", "docs"]
        }


def api_nodes_010(source: Path) -> set[str]:
    ids: set[str] = set()
    for path in sorted((source / "comfy_api_nodes").glob("*.py")):
        ids |= set(re.findall(r'node_id="([^"]+)"', path.read_text()))
    return ids


def classify(wheel: Path, source: Path) -> dict:
    documented = docs_classes(wheel)
    recorded_api = api_nodes_010(source) & documented
    named_api = {c for c in documented - recorded_api if API_PROVIDERS.search(c)}
    local = documented - recorded_api - named_api - FRONTEND_ONLY
    return {
        "source": f"comfyui-embedded-docs {wheel.name.split('-')[1]}: {len(documented)} documented classes; "
        f"{len(recorded_api)} paid API nodes declared in ComfyUI 0.10.0's comfy_api_nodes, "
        f"{len(named_api)} newer ones by provider name (scripts/record_comfyui_today_classes.py), "
        f"{len(FRONTEND_ONLY & documented)} frontend-only types left out",
        "local": sorted(local),
        "api": sorted(recorded_api | named_api),
    }


if __name__ == "__main__":
    print(json.dumps(classify(Path(sys.argv[1]), Path(sys.argv[2])), indent=0))
