"""Which of the web UI's local templates Comfy Cluster can run node for node, from the installed templates
package (comfyui-workflow-templates-json): `python scripts/templates_coverage.py` rewrites
docs/benchmarks/templates.json; `--check` only compares it with a fresh computation.

Counting (docs in ../shared/reference/comfyui-today.md): a template is local when its index entry does not
say `openSource: false` (false marks a paid cloud API node); its classes are the `type` of every node in
`nodes` and in every subgraph definition, less the subgraph ids and the frontend-only types. A class is
offered when the core registry has it (packs are not counted). Each template weighs its recorded
`usage` in the usage-weighted figures; its kind is the `type` of its index group (image, video, audio, 3d, llm).

The render half (`renders`, `render_error` per template, `render_usage_share` per kind) is written by
scripts/templates_render.py, which renders each node-complete template on the tiny demo files (minutes, so not
in CI). This script keeps the committed render flags of the templates that are still node-complete, marks the
others `false` (a class not offered) or `null` (node-complete now, not rendered yet), and recomputes the shares
from the flags.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULT = REPO / "docs" / "benchmarks" / "templates.json"
# Types the web UI draws itself; they never reach the server.
FRONTEND_ONLY = {"Note", "MarkdownNote", "Reroute", "PrimitiveNode"}


def templates_dir() -> Path:
    import comfyui_workflow_templates_json

    return Path(comfyui_workflow_templates_json.__file__).parent / "templates"


def local_templates(folder: Path) -> list[dict]:
    """The index entries of the templates that run without a paid API, in index order, each with its group's
    `type` as `kind`."""
    index = json.loads((folder / "index.json").read_text())
    return [
        {**t, "kind": group.get("type", "")}
        for group in index
        for t in group["templates"]
        if t.get("openSource") is not False
    ]


def template_classes(workflow: dict) -> set[str]:
    """The node classes a UI-format workflow asks the server for (its subgraphs' inner nodes included)."""
    subgraphs = workflow.get("definitions", {}).get("subgraphs", [])
    ids = {sg["id"] for sg in subgraphs}
    types = {node["type"] for node in workflow.get("nodes", [])}
    for sg in subgraphs:
        types |= {node["type"] for node in sg.get("nodes", [])}
    return types - ids - FRONTEND_ONLY


def coverage(folder: Path, offered: set[str]) -> dict:
    rows, missing_usage, missing_count = [], defaultdict(int), defaultdict(int)
    for entry in local_templates(folder):
        path = folder / f"{entry['name']}.json"
        if not path.is_file():  # the index may name a template whose workflow the package leaves out
            rows.append({"name": entry["name"], "usage": entry.get("usage", 0), "missing": None})
            continue
        missing = sorted(template_classes(json.loads(path.read_text())) - offered)
        usage = entry.get("usage", 0)
        rows.append({"name": entry["name"], "kind": entry["kind"], "usage": usage, "missing": missing})
        for cls in missing:
            missing_usage[cls] += usage
            missing_count[cls] += 1
    return summary(rows, missing_usage, missing_count)


def summary(rows: list[dict], missing_usage: dict[str, int], missing_count: dict[str, int]) -> dict:
    readable = [r for r in rows if r["missing"] is not None]
    complete = [r for r in readable if not r["missing"]]
    total_usage = sum(r["usage"] for r in readable)
    complete_usage = sum(r["usage"] for r in complete)
    ranked = sorted(missing_usage, key=lambda c: (-missing_usage[c], c))
    return {
        "local_templates": len(readable),
        "unreadable_templates": sorted(r["name"] for r in rows if r["missing"] is None),
        "complete_templates": len(complete),
        "complete_usage_share": round(complete_usage / total_usage, 4) if total_usage else 0.0,
        "missing_classes": [{"class": c, "templates": missing_count[c], "usage": missing_usage[c]} for c in ranked],
        "templates": sorted(readable, key=lambda r: (-r["usage"], r["name"])),
    }


RENDER_KEYS = ("renders", "render_error")
NOT_RENDERED = "not rendered yet: run python scripts/templates_render.py"


def with_renders(node_half: dict, renders: dict[str, dict]) -> dict:
    """The node half with each template's render flag and reason (from `renders`, name -> {renders,
    render_error}, for the node-complete templates) and the render-weighted share of each kind's usage."""
    rows = []
    for row in node_half["templates"]:
        if row["missing"]:
            flag = {"renders": False, "render_error": f"not offered: {', '.join(row['missing'])}"}
        else:
            flag = {k: renders.get(row["name"], {}).get(k) for k in RENDER_KEYS}
            if flag["renders"] is None:
                flag["render_error"] = NOT_RENDERED
        rows.append({**row, **flag})
    out = {k: v for k, v in node_half.items() if k != "templates"}
    out["render_usage_share"] = render_shares(rows)
    return {**out, "templates": rows}


def render_shares(rows: list[dict]) -> dict[str, float]:
    """Per kind (and `all`): the usage share of the local templates whose render flag is true; a template not
    rendered (null) counts as not running."""
    total, ok = defaultdict(int), defaultdict(int)
    for row in rows:
        for kind in (row["kind"], "all"):
            total[kind] += row["usage"]
            ok[kind] += row["usage"] if row["renders"] is True else 0
    return {k: round(ok[k] / total[k], 4) if total[k] else 0.0 for k in sorted(total)}


def node_half(result: dict) -> dict:
    """`result` without its render half: what compute() gives."""
    rows = [{k: v for k, v in row.items() if k not in RENDER_KEYS} for row in result["templates"]]
    return {**{k: v for k, v in result.items() if k not in ("render_usage_share", "templates")}, "templates": rows}


def committed_renders() -> dict[str, dict]:
    if not RESULT.is_file():
        return {}
    return {row["name"]: row for row in json.loads(RESULT.read_text())["templates"] if "renders" in row}


CORE_CLASSES = {"KSampler", "CheckpointLoaderSimple", "VAEDecode", "SaveImage"}


def offered_classes() -> set[str]:
    # The registry's core set: nodes.NODE_CLASS_MAPPINGS also gains the packs once a registry is built.
    from comfy_bridge.registry import build_registry

    offered = set(build_registry(None, load_custom_nodes=False).builtin)
    # A registry that lost the core (a node module broken mid-edit) would mark every template "not offered" and
    # overwrite the committed rows: refuse instead.
    if not CORE_CLASSES <= offered:
        raise SystemExit(f"the registry lacks core classes {sorted(CORE_CLASSES - offered)}: is a node module broken?")
    return offered


def compute() -> dict:
    from importlib.metadata import version

    result = coverage(templates_dir(), offered_classes())
    return {"package": f"comfyui-workflow-templates-json {version('comfyui-workflow-templates-json')}", **result}


def is_stale(committed: dict, fresh: dict) -> bool:
    """The committed node half differs from `fresh`, or its render shares from its own flags."""
    return node_half(committed) != fresh or committed.get("render_usage_share") != render_shares(committed["templates"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed result is stale")
    args = parser.parse_args(argv)
    fresh = compute()
    if args.check:
        stale = not RESULT.is_file() or is_stale(json.loads(RESULT.read_text()), fresh)
        print("stale: rerun scripts/templates_coverage.py" if stale else "up to date")
        return 1 if stale else 0
    RESULT.write_text(json.dumps(with_renders(fresh, committed_renders()), indent=1) + "\n")
    share = fresh["complete_usage_share"]
    print(
        f"{fresh['complete_templates']} of {fresh['local_templates']} local templates have every node offered "
        f"({share:.0%} of their usage)"
    )
    for row in fresh["missing_classes"][:25]:
        print(f"  {row['class']}: {row['templates']} templates, usage {row['usage']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
