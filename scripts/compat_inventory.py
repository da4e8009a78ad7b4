"""The inventory of ComfyUI's module surface that node packs use, and how much of it resolves here.

    python scripts/compat_inventory.py --mirrors /work/.mirror > docs/compat-inventory.json
    python scripts/compat_inventory.py --markdown docs/compat-inventory.json > docs/compat-inventory.md

Reads git snapshots (bare repositories, as the search tool's `fetch` leaves them under
<mirrors>/<owner>+<name>/repo) of ComfyUI 0.3.64 (Comfy-Org/ComfyUI), of a newer ComfyUI (hiddenswitch/ComfyUI,
which merged upstream on 2026-01-23; its modules moved under comfy/cmd and comfy/nodes are mapped back to
ComfyUI's names), and of the packs in PACKS. From the sources alone (nothing is imported from them) it lists:
- the names each ComfyUI module defines at its top level;
- the ComfyUI names each pack uses: `from comfy.x import y`, `import comfy.x`, and attribute chains on
  such imports (`comfy.model_management.unet_manual_cast`, `mm.unet_manual_cast`), each marked module-level
  (run when the pack is imported: module and class bodies) or inside a function (run when a node runs).
Then it resolves each used name that ComfyUI offers against this process's modules (comfy_bridge.compat
installed) and writes the result and the coverage as JSON.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOTS = (
    "comfy",
    "comfy_extras",
    "comfy_api",
    "comfy_execution",
    "server",
    "folder_paths",
    "nodes",
    "node_helpers",
    "latent_preview",
    "execution",
    "app",
    "utils",
    "comfy_config",
    "protocol",
)
# Names missing here on purpose, with what a pack gets and why.
MISSING_WHY = {
    "nodes.unCLIPCheckpointLoader": "AttributeError (module 'nodes' has no attribute 'unCLIPCheckpointLoader'): the unCLIP family and Stable "
    "Cascade, whose stage C checkpoints Inspire loads with it, are not implemented (docs/nodes.md)",
}
# Names whose raise here is ComfyUI's own: ComfyUI raises at the same call in the same situation, so they behave
# as ComfyUI's (counted as supported; the Markdown lists them with why).
RAISES_AS_COMFYUI = {
    "comfy.ldm.modules.attention.attention_xformers": "raises without the xformers package, as ComfyUI's does (a NameError on `xformers` there); runs xformers' "
    "memory-efficient attention when it is installed",
}


def _context_handler_with_retained_conds() -> None:
    """KJNodes' WAN context windows with cond_retain_index_list set, as its node passes it."""
    import comfy.context_windows as cw

    handler = cw.IndexListContextHandler(
        cw.get_matching_context_schedule(cw.ContextSchedules.STATIC_STANDARD),
        cw.get_matching_fuse_method(cw.ContextFuseMethods.PYRAMID),
        context_length=16,
        cond_retain_index_list="0",
    )
    handler.settings()


def _calc_cond_batch_on_a_model() -> None:
    import comfy.samplers
    import torch

    comfy.samplers.calc_cond_batch(None, [None], torch.zeros(1), torch.ones(1), {})


# Calls that make a name that does not behave as ComfyUI's raise as a pack's call does: the Markdown lists the
# error text they raise (the classifier's notes elide f-string arguments).
ERROR_PROBES = {
    "comfy.context_windows.IndexListContextHandler": _context_handler_with_retained_conds,
    "comfy.model_detection.model_config_from_unet": lambda: importlib.import_module(
        "comfy.model_detection"
    ).model_config_from_unet({}, ""),
    "comfy.samplers.calc_cond_batch": _calc_cond_batch_on_a_model,
}


def probe_error(name: str) -> str | None:
    """The error text a pack's call of `name` gets (ERROR_PROBES), or None when no probe is written for it."""
    probe = ERROR_PROBES.get(name)
    if probe is None:
        return None
    try:
        probe()
    except Exception as e:  # noqa: BLE001 - the error a pack gets, whatever its type
        return f"{type(e).__name__}: {e}"
    return None


# Packs that import a module of their own with one of these names (utils, nodes, ...) are told apart by
# requiring the name to exist in ComfyUI: anything else is the pack's own module or a removed name.

PACKS = {
    "ComfyUI-Impact-Pack": "ltdrdata+ComfyUI-Impact-Pack",
    "ComfyUI-Inspire-Pack": "ltdrdata+ComfyUI-Inspire-Pack",
    "ComfyUI-KJNodes": "kijai+ComfyUI-KJNodes",
    "rgthree-comfy": "rgthree+rgthree-comfy",
    "ComfyUI_essentials": "cubiq+ComfyUI_essentials",
    "ComfyUI-Custom-Scripts": "pythongosssss+ComfyUI-Custom-Scripts",
    "ComfyUI-Easy-Use": "yolain+ComfyUI-Easy-Use",
    "comfyui_controlnet_aux": "Fannovel16+comfyui_controlnet_aux",
    "ComfyUI_IPAdapter_plus": "cubiq+ComfyUI_IPAdapter_plus",
    "ComfyUI-VideoHelperSuite": "Kosinkadink+ComfyUI-VideoHelperSuite",
    "ComfyUI-GGUF": "city96+ComfyUI-GGUF",
    "ComfyUI_Comfyroll_CustomNodes": "Suzie1+ComfyUI_Comfyroll_CustomNodes",
    "ComfyUI-Crystools": "crystian+ComfyUI-Crystools",
    "cg-use-everywhere": "chrisgoringe+cg-use-everywhere",
    "efficiency-nodes-comfyui": "jags111+efficiency-nodes-comfyui",
    "was-node-suite-comfyui": "WASasquatch+was-node-suite-comfyui",
    "ComfyUI-Advanced-ControlNet": "Kosinkadink+ComfyUI-Advanced-ControlNet",
    "ComfyUI-AnimateDiff-Evolved": "Kosinkadink+ComfyUI-AnimateDiff-Evolved",
    "ComfyUI_UltimateSDUpscale": "ssitu+ComfyUI_UltimateSDUpscale",
    "ComfyUI-WanVideoWrapper": "kijai+ComfyUI-WanVideoWrapper",
}
COMFYUI_0_3_64 = "Comfy-Org+ComfyUI"
COMFYUI_NEWER = "hiddenswitch+ComfyUI"
# hiddenswitch/ComfyUI keeps ComfyUI's top-level modules inside its package: map them back.
MOVED = {
    "comfy.cmd.folder_paths": "folder_paths",
    "comfy.cmd.server": "server",
    "comfy.cmd.execution": "execution",
    "comfy.cmd.latent_preview": "latent_preview",
    "comfy.cmd.protocol": "protocol",
    "comfy.nodes.base_nodes": "nodes",
    "comfy.node_helpers": "node_helpers",
    "comfy_extras.nodes": "comfy_extras",
}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, errors="replace"
    ).stdout


def python_files(repo: Path) -> dict[str, str]:
    """{path: source} of the .py files of the snapshot's HEAD (files the snapshot lacks are skipped)."""
    out = {}
    for path in git(repo, "ls-tree", "-r", "--name-only", "HEAD").splitlines():
        if not path.endswith(".py"):
            continue
        try:
            out[path] = git(repo, "show", f"HEAD:{path}")
        except subprocess.CalledProcessError:
            continue
    return out


def module_name(path: str) -> str:
    parts = path[:-3].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def top_level_names(tree: ast.Module) -> set[str]:
    """Names a module binds at its top level (also inside top-level if/try blocks)."""
    names: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name):
                            names.add(n.id)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for a in node.names:
                    if a.name != "*":
                        names.add((a.asname or a.name).split(".")[0])
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                visit(node.body)
                visit(getattr(node, "orelse", []))
                visit(getattr(node, "finalbody", []))
                for h in getattr(node, "handlers", []):
                    visit(h.body)

    visit(tree.body)
    return names


def comfyui_name(name: str, moved: dict[str, str]) -> str:
    for old, new in moved.items():
        if name == old or name.startswith(old + "."):
            return new + name[len(old) :]
    return name


def comfyui_surface(repo: Path, moved: dict[str, str]) -> dict[str, list[str]]:
    surface: dict[str, set[str]] = {}
    for path, source in python_files(repo).items():
        name = comfyui_name(module_name(path), moved)
        if name.split(".")[0] not in ROOTS:
            continue
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        surface.setdefault(name, set()).update(top_level_names(tree))
        parent, _, child = name.rpartition(".")
        if parent:
            surface.setdefault(parent, set()).add(child)  # a submodule is a name of its package
    return {k: sorted(v) for k, v in sorted(surface.items())}


class UseCollector(ast.NodeVisitor):
    """ComfyUI names a pack module uses, with whether the use runs at import (module or class body)."""

    def __init__(self) -> None:
        self.depth = 0  # > 0 inside a function body
        self.bound: list[dict[str, str]] = [{}]
        self.uses: set[tuple[str, bool]] = set()

    def _bind(self, local: str, target: str) -> None:
        self.bound[-1][local] = target

    def _lookup(self, local: str) -> str | None:
        for scope in reversed(self.bound):
            if local in scope:
                return scope[local]
        return None

    def _use(self, name: str) -> None:
        self.uses.add((name, self.depth == 0))

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            if a.name.split(".")[0] not in ROOTS:
                continue
            self._use(a.name)
            if a.asname:
                self._bind(a.asname, a.name)
            else:
                self._bind(a.name.split(".")[0], a.name.split(".")[0])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module or node.module.split(".")[0] not in ROOTS:
            return
        for a in node.names:
            if a.name == "*":
                self._use(node.module)
                continue
            self._use(f"{node.module}.{a.name}")
            self._bind(a.asname or a.name, f"{node.module}.{a.name}")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        chain = []
        value: ast.AST = node
        while isinstance(value, ast.Attribute):
            chain.append(value.attr)
            value = value.value
        if isinstance(value, ast.Name):
            base = self._lookup(value.id)
            if base is not None:
                self._use(".".join([base, *reversed(chain)]))
                return
        self.generic_visit(node)

    def _function(self, node: ast.AST) -> None:
        for d in getattr(node, "decorator_list", []):
            self.visit(d)
        self.depth += 1
        self.bound.append({})
        body = node.body if isinstance(node.body, list) else [node.body]  # a lambda's body is one expression
        for child in body:
            self.visit(child)
        self.bound.pop()
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function


def pack_uses(repo: Path) -> dict[str, bool]:
    """{used name: True if some use runs at import}."""
    uses: dict[str, bool] = {}
    for source in python_files(repo).values():
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        collector = UseCollector()
        collector.visit(tree)
        for name, at_import in collector.uses:
            uses[name] = uses.get(name, False) or at_import
    return uses


def offered(name: str, surfaces: list[dict[str, list[str]]]) -> str | None:
    """The longest prefix of `name` that ComfyUI offers (module, or module + top-level name), or None."""
    parts = name.split(".")
    best = None
    for surface in surfaces:
        for cut in range(len(parts), 0, -1):
            module = ".".join(parts[:cut])
            if module in surface:
                found = module
                if cut < len(parts) and parts[cut] in surface[module]:
                    found = f"{module}.{parts[cut]}"
                elif cut < len(parts):
                    break  # a module, but not this name in it
                if best is None or len(found) > len(best):
                    best = found
                break
    return best


def lookup(name: str) -> tuple[bool, object, type | None]:
    """(exists here, value, owning class) of `name`: a module, or a module's attribute."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        except Exception:  # noqa: BLE001 - a module that fails to import does not resolve
            return False, None, None
        owner = None
        try:
            for attr in parts[cut:]:
                owner = obj if isinstance(obj, type) else None
                obj = getattr(obj, attr)
        except Exception:  # noqa: BLE001 - UnsupportedAttribute and the like count as missing
            return False, None, None
        return True, obj, owner
    return False, None, None


def status(name: str) -> tuple[str, str]:
    """(status, notes): "missing", or surface_doc's reading of the code (supported / partly / not supported);
    model classes that refuse to be built (UnsupportedModel) are "not supported"."""
    from comfy_bridge.compat.comfy.ldm.model_classes import UnsupportedModel
    from comfy_bridge.packs.surface_doc import NOT_SUPPORTED, classify

    found, value, owner = lookup(name)
    if not found:
        return "missing", ""
    if isinstance(value, type) and issubclass(value, UnsupportedModel):
        return NOT_SUPPORTED, "building it raises UnsupportedFeature (the model runs on the executors)"
    state, notes = classify(value, owner)
    if name in RAISES_AS_COMFYUI and state != "supported":
        return "supported", f"raises as ComfyUI: {RAISES_AS_COMFYUI[name]}"
    return state, notes


def build(mirrors: Path) -> dict:
    old = comfyui_surface(mirrors / COMFYUI_0_3_64 / "repo", {})
    new = comfyui_surface(mirrors / COMFYUI_NEWER / "repo", MOVED)
    used: dict[str, dict] = defaultdict(lambda: {"packs": [], "module_level": False})
    commits = {}
    for pack, folder in PACKS.items():
        repo = mirrors / folder / "repo"
        commits[pack] = git(repo, "log", "-1", "--format=%H %cs").split()
        for name, at_import in pack_uses(repo).items():
            entry = used[name]
            entry["packs"].append(pack)
            entry["module_level"] = entry["module_level"] or at_import
    from comfy_bridge import compat

    compat.import_as_comfyui_has()
    names = []
    unknown: dict[str, list[str]] = {}
    for name, entry in sorted(used.items()):
        in_old, in_new = offered(name, [old]), offered(name, [new])
        comfy_name = max([n for n in (in_old, in_new) if n], key=len, default=None)
        if comfy_name is None:
            # The pack's own module of the same name, or a name no ComfyUI we read has (newer than the
            # sources, or removed): the comfy* ones are listed apart.
            if name.split(".")[0].startswith("comfy"):
                unknown[name] = sorted(entry["packs"])
            continue
        names.append(
            {
                "name": comfy_name,
                "module_level": entry["module_level"],
                "packs": sorted(entry["packs"]),
                "comfyui": [v for v, n in (("0.3.64", in_old), ("newer", in_new)) if n == comfy_name],
            }
        )
    merged: dict[str, dict] = {}
    for n in names:  # several uses can reduce to one offered name
        m = merged.setdefault(n["name"], {**n, "packs": set()})
        m["packs"].update(n["packs"])
        m["module_level"] = m["module_level"] or n["module_level"]
        m["comfyui"] = sorted(set(m["comfyui"]) | set(n["comfyui"]))
    result = []
    for name, m in sorted(merged.items()):
        state, notes = status(name)
        error = probe_error(name) if state != "supported" else None
        result.append(
            {
                **m,
                "packs": sorted(m["packs"]),
                "present": state != "missing",
                "status": state,
                **({"notes": notes} if notes else {}),
                **({"error": error} if error else {}),
            }
        )
    module_level = [r for r in result if r["module_level"]]
    inside = [r for r in result if not r["module_level"]]

    def counts(rows: list[dict]) -> dict:
        out = {"names": len(rows), "present": sum(r["present"] for r in rows)}
        for state in ("supported", "partly supported", "not supported", "missing"):
            out[state] = sum(r["status"] == state for r in rows)
        return out

    return {
        "generated_by": "scripts/compat_inventory.py",
        "sources": {
            "comfyui_0_3_64": git(mirrors / COMFYUI_0_3_64 / "repo", "rev-parse", "HEAD").strip(),
            "comfyui_newer (hiddenswitch/ComfyUI)": git(mirrors / COMFYUI_NEWER / "repo", "rev-parse", "HEAD").strip(),
            "packs": {p: {"commit": c[0], "date": c[1]} for p, c in commits.items()},
        },
        "coverage": {"module_level": counts(module_level), "inside_functions": counts(inside)},
        "comfyui_modules": {
            "0.3.64": len(old),
            "newer": len(new),
            "names_0.3.64": sum(map(len, old.values())),
            "names_newer": sum(map(len, new.values())),
        },
        "names": result,
        "not_in_comfyui_read": {name: {"packs": packs, "present": lookup(name)[0]} for name, packs in unknown.items()},
    }


def markdown(inventory: dict) -> str:
    """The coverage and the names that are not supported or missing, as Markdown."""
    cov = inventory["coverage"]
    lines = [
        "# ComfyUI names the most used packs import, and how many resolve here",
        "",
        "Generated by `python scripts/compat_inventory.py --markdown docs/compat-inventory.json` from",
        "[compat-inventory.json](compat-inventory.json) (made by the same script from the packs' and ComfyUI's",
        "sources); `tests/engine/test_compat_inventory.py` keeps both in step with the code.",
        "",
        f"Sources: ComfyUI 0.3.64 ({inventory['sources']['comfyui_0_3_64'][:10]}), "
        f"hiddenswitch/ComfyUI ({inventory['sources']['comfyui_newer (hiddenswitch/ComfyUI)'][:10]}, "
        "upstream merged 2026-01-23), and these packs' snapshots:",
        "",
        "| pack | commit | date |",
        "|---|---|---|",
    ]
    lines += [f"| {p} | {c['commit'][:10]} | {c['date']} |" for p, c in inventory["sources"]["packs"].items()]
    lines += [
        "",
        "A name is *module-level* when some pack uses it while being imported (module or class body), "
        "else *inside functions* (when a node runs). *supported* / *partly supported* / *not supported* are "
        "read from our code as in compat-surface.md (a model class that refuses to be built is not "
        "supported); *missing*: no such name here.",
        "",
        "| names | count | present | supported | partly supported | not supported | missing |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, title in (("module_level", "module-level"), ("inside_functions", "inside functions")):
        c = cov[key]
        lines.append(
            f"| {title} | {c['names']} | {c['present']} ({100 * c['present'] / c['names']:.1f} %) | "
            f"{c['supported']} ({100 * c['supported'] / c['names']:.1f} %) | {c['partly supported']} | "
            f"{c['not supported']} | {c['missing']} |"
        )
    lines += [
        "",
        "## Names that are not supported, partly supported or missing",
        "",
        "| name | where | status | packs | notes |",
        "|---|---|---|---|---|",
    ]
    for r in inventory["names"]:
        if r["status"] != "supported":
            where = "module-level" if r["module_level"] else "inside functions"
            note = r.get("error", "") or r.get("notes", "") or MISSING_WHY.get(r["name"], "")
            lines.append(
                f"| `{r['name']}` | {where} | {r['status']} | {', '.join(r['packs'])} | "
                f"{' '.join(note.replace('|', '/').split())} |"
            )
    lines += [
        "",
        "## Names that raise here where ComfyUI raises too",
        "",
        "Counted as supported: the same call raises in ComfyUI in the same situation.",
        "",
        "| name | where | packs | why |",
        "|---|---|---|---|",
    ]
    for r in inventory["names"]:
        if r["name"] in RAISES_AS_COMFYUI:
            where = "module-level" if r["module_level"] else "inside functions"
            lines.append(f"| `{r['name']}` | {where} | {', '.join(r['packs'])} | {RAISES_AS_COMFYUI[r['name']]} |")
    lines += [
        "",
        "## Names packs use that neither ComfyUI source read here has",
        "",
        "Newer than both sources, removed from ComfyUI, or set by a pack itself (monkey-patching).",
        "",
        "| name | packs | present here |",
        "|---|---|---|",
    ]
    for name, entry in inventory["not_in_comfyui_read"].items():
        lines.append(f"| `{name}` | {', '.join(entry['packs'])} | {'yes' if entry['present'] else 'no'} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--markdown", type=Path, help="write the Markdown summary of this inventory JSON instead")
    args = parser.parse_args()
    if args.markdown:
        sys.stdout.write(markdown(json.loads(args.markdown.read_text())))
        return
    json.dump(build(args.mirrors), sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
