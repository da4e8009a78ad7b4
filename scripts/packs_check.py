#!/usr/bin/env python
"""Real node packs on Comfy Cluster, checked against what ComfyUI 0.3.64 does with them.

    # once, against real ComfyUI started with PACKS and scripts/pack_probes as custom_nodes folders:
    python scripts/packs_check.py record PACKS --url http://127.0.0.1:PORT --log comfyui.log
    # then, any time, against our server (started here, on a fresh workspace):
    python scripts/packs_check.py check PACKS [--install] [--report out.json] [--markdown table.md]

PACKS is a folder holding the packs of tests/packs/real_packs/manifest.json, one sub-folder each (a git
clone at the pinned commit with its extras in place, or a plain copy). Run both servers from one Python
environment, the one the manifest's "environment" describes, with the packs in real ComfyUI's own
custom_nodes folder (some packs expect it) and scripts/pack_probes added through extra_model_paths.yaml. CI cannot download packs, so this runs at development time and
its table goes in docs/packs.md; the tests in tests/packs keep what can run offline.

`record` writes tests/packs/real_packs/comfyui_0_3_64/registry.json: per pack, whether real ComfyUI imported
it (from its startup log), the node classes it registered (/object_info's python_module), its web
extensions (/extensions) and its GET routes with the status each answers (from the probe). The expected
outputs of the recorded cases (tests/packs/real_packs/cases/<folder>.json) are recorded by
scripts/record_comfyui_fixtures.py --out-dir tests/packs/real_packs/comfyui_0_3_64.

`check` optionally installs each pack's requirements under the torch guard (comfy_bridge.packs.pip_guard),
starts `comfy-cluster serve` with the packs (pip runs the packs start themselves keep numpy and torch: run
real ComfyUI with the same PIP_CONSTRAINT when recording), and reports per pack: imported or not with the first missing
name, the nodes ComfyUI registers that we do not, web extensions served, routes answering as they do on
ComfyUI, and the recorded cases giving ComfyUI's outputs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
import record_comfyui_fixtures as recorder  # noqa: E402  (a sibling script, not a package)

REAL_PACKS = REPO / "tests" / "packs" / "real_packs"
MANIFEST = REAL_PACKS / "manifest.json"
FIXTURES = REAL_PACKS / "comfyui_0_3_64"
CASES = REAL_PACKS / "cases"
PROBES = REPO / "scripts" / "pack_probes"  # a custom_nodes folder holding only the probe
ROUTE_TIMEOUT_S = 10.0
# GET routes are asked without parameters, except those whose path names an action (ComfyUI-Manager's
# /manager/reboot restarts the server, /snapshot/restore rewrites packs): a word of the path among these.
ACTION_WORDS = frozenset(
    {
        "reboot",
        "restart",
        "update",
        "install",
        "uninstall",
        "remove",
        "delete",
        "restore",
        "save",
        "reset",
        "start",
        "stop",
        "set",
        "switch",
        "refresh",
        "deduplicate",
        "upload",
        "download",
        "fetch",
        "clear",
        "fix",
        "import",
        "export",
    }
)
# The exception lines of a failed import that name what was missing.
MISSING = re.compile(
    r"^(?:ModuleNotFoundError|ImportError|AttributeError|NameError|NotImplementedError)"
    r"[^\n]*$",
    re.M,
)


def load_manifest(path: Path = MANIFEST) -> list[dict]:
    return json.loads(path.read_text())["packs"]


# -- reading a server: the import log, /object_info, /extensions, the probe's routes --------------------


def import_failures(log_text: str) -> dict[str, str]:
    """{pack folder: first error line} for the packs whose import failed, from ComfyUI's startup log (our
    server writes the same 'Import times for custom nodes' block and tracebacks)."""
    failed = {}
    for line in log_text.splitlines():
        m = re.search(r"\(IMPORT FAILED\):\s*(.+)$", line)
        if m:
            failed[Path(m.group(1).strip()).name] = ""
    # A traceback ends with the exception line, then "Cannot import <path> module for custom nodes".
    for m in re.finditer(
        r"Traceback \(most recent call last\):\n(.*?)\nCannot import (.+?) module for custom "
        r"nodes",
        log_text,
        re.S,
    ):
        folder = Path(m.group(2).strip()).name
        if folder in failed and not failed[folder]:
            lines = [ln for ln in m.group(1).splitlines() if ln and not ln.startswith(" ")]
            named = MISSING.findall(m.group(1))
            failed[folder] = (named[-1] if named else lines[-1] if lines else "").strip()[:300]
    return failed


def http_get(base: str, path: str, timeout: float = ROUTE_TIMEOUT_S) -> tuple[int | str, bytes]:
    try:
        with urllib.request.urlopen(base + path, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, b""
    except TimeoutError:
        return "timeout", b""
    except (urllib.error.URLError, ConnectionError) as e:
        return f"error: {e}", b""


def is_action(path: str) -> bool:
    return bool(ACTION_WORDS & set(re.split(r"[/_.\-]+", path.lower())))


def pack_of_file(file: str, packs_dir: Path) -> str | None:
    try:
        return Path(file).resolve().relative_to(packs_dir.resolve()).parts[0]
    except (ValueError, IndexError):
        return None


def read_server(base: str, packs_dir: Path, folders: list[str], log_text: str) -> dict[str, dict]:
    """Per pack folder: imported, error, nodes, extensions, routes {path: status} (GET routes without
    path parameters that name no action, each asked once)."""
    failures = import_failures(log_text)
    info = json.loads(http_get(base, "/object_info", timeout=300)[1])
    extensions = json.loads(http_get(base, "/extensions")[1])
    routes = json.loads(http_get(base, "/packs_check/routes")[1])
    result = {}
    for folder in folders:
        module = f"custom_nodes.{folder}"
        nodes = sorted(name for name, d in info.items() if d.get("python_module") == module)
        prefix = f"/extensions/{folder}/"
        own = sorted(
            {
                r["path"]
                for r in routes
                if r["method"] == "GET"
                and "{" not in r["path"]
                and not is_action(r["path"])
                and pack_of_file(r["file"], packs_dir) == folder
            }
        )
        result[folder] = {
            "imported": folder not in failures and (packs_dir / folder).is_dir(),
            "error": failures.get(folder) or None,
            "nodes": nodes,
            "extensions": sorted(e for e in extensions if e.startswith(prefix)),
            "routes": {path: http_get(base, path)[0] for path in own},
        }
    return result


# -- running a server ------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    process: subprocess.Popen
    base: str
    log_path: Path

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)


def keep_installed(path: Path) -> Path:
    """pip constraints holding this environment's versions of what packs' own pip runs would change under
    both servers alike (ComfyUI-Manager's startup script installs numpy<2): numpy and the torch family."""
    from comfy_bridge.packs.pip_guard import constraints, installed_torch_family, installed_versions

    path.write_text(constraints(installed_torch_family() | installed_versions(["numpy"])))
    return path


def start_our_server(packs_dir: Path, workspace: Path, wait_s: float, extra_args: list[str]) -> Server:
    """`comfy-cluster serve` on a fresh workspace with the packs in its custom_nodes folder (linked) and the probe
    added by its extra_model_paths.yaml, as a user would."""
    (workspace / "custom_nodes").mkdir(parents=True, exist_ok=True)
    for pack in packs_dir.iterdir():  # some packs refuse to load from a path without "custom_nodes" in it
        (workspace / "custom_nodes" / pack.name).symlink_to(pack.resolve())
    (workspace / "extra_model_paths.yaml").write_text(f"packs_check:\n  custom_nodes: {PROBES}\n")
    port = free_port()
    log_path = workspace / "server.log"
    cmd = [
        sys.executable,
        "-m",
        "comfy_bridge.cli",
        "serve",
        "--workspace",
        str(workspace),
        "--port",
        str(port),
        *extra_args,
    ]
    env = {**os.environ, "PIP_CONSTRAINT": str(keep_installed(workspace / "keep-installed.txt"))}
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=workspace, env=env
        )
    server = Server(process, f"http://127.0.0.1:{port}", log_path)
    deadline = time.time() + wait_s
    while time.time() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited ({process.returncode}):\n{server.log_text()[-3000:]}")
        if http_get(server.base, "/system_stats", timeout=2)[0] == 200:
            return server
        time.sleep(1)
    server.stop()
    raise TimeoutError(f"the server did not answer in {wait_s} s:\n{server.log_text()[-3000:]}")


# -- requirements ----------------------------------------------------------------------------------------


def install_requirements(packs_dir: Path, folders: list[str]) -> dict[str, str]:
    """{folder: 'ok' | 'nothing to install' | why it failed}, each pack installed on its own under the guard."""
    from comfy_bridge.packs.pip_guard import RequirementsError
    from comfy_bridge.packs.pip_guard import install_requirements as install

    results = {}
    for folder in folders:
        req = packs_dir / folder / "requirements.txt"
        if not req.is_file():
            results[folder] = "no requirements.txt"
            continue
        try:
            results[folder] = ", ".join(install(req)) or "nothing to install"
        except RequirementsError as err:
            results[folder] = str(err).splitlines()[0][:300]
        print(f"  requirements of {folder}: {results[folder]}", flush=True)
    return results


# -- cases -----------------------------------------------------------------------------------------------


def same_outputs(expected: dict, got: dict) -> tuple[bool, str]:
    """A case gives ComfyUI's outputs: the same status, and per output the same image pixels (sha256 of the
    decoded bytes), latents and UI values."""
    if expected.get("status") != got.get("status"):
        return False, f"status {got.get('status')!r}, ComfyUI {expected.get('status')!r}"
    if expected.get("status") != "success":
        return True, ""
    for node_id, want in (expected.get("outputs") or {}).items():
        have = (got.get("outputs") or {}).get(node_id)
        if want != have:
            return False, f"output of node {node_id} differs"
    return True, ""


def run_cases(base: str, folder: str) -> list[dict]:
    cases_file, fixture_file = CASES / f"{folder}.json", FIXTURES / f"{folder}.json"
    if not cases_file.is_file() or not fixture_file.is_file():
        return []
    expected_by_name = {c["name"]: c["expected"] for c in json.loads(fixture_file.read_text())["cases"]}
    _, input_specs, cases = recorder.load_cases(cases_file)
    comfy = recorder.ComfyUI(base)
    for name in input_specs:
        comfy.upload_input(name, recorder.make_input_file(input_specs[name]))
    results = []
    for case in cases:
        expected = expected_by_name.get(case["name"])
        try:
            got = recorder.record_case(comfy, case)
            ok, why = same_outputs(expected, got) if expected else (False, "not recorded on ComfyUI")
        except Exception as err:  # one case's failure is reported, the others still run
            ok, why = False, f"{type(err).__name__}: {err}"
        results.append({"case": case["name"], "ok": ok, "why": why})
    return results


# -- the report ------------------------------------------------------------------------------------------


@dataclass
class PackResult:
    folder: str
    imported: bool
    error: str | None
    nodes_expected: int
    nodes_missing: list[str]
    extensions_missing: list[str]
    extensions_not_served: list[str]
    routes_differing: dict[str, list] = field(default_factory=dict)
    cases: list[dict] = field(default_factory=list)
    requirements: str = ""

    @property
    def works(self) -> bool:
        return (
            self.imported
            and not self.nodes_missing
            and not self.extensions_missing
            and not self.extensions_not_served
            and not self.routes_differing
            and all(c["ok"] for c in self.cases)
        )


def status_class(status: int | str) -> str:
    return f"{status // 100}xx" if isinstance(status, int) else str(status)


def compare(folder: str, real: dict, ours: dict, served: dict[str, int | str]) -> PackResult:
    routes = {
        path: [status, ours["routes"].get(path, "absent")]
        for path, status in real["routes"].items()
        if status_class(status) != status_class(ours["routes"].get(path, "absent"))
    }
    return PackResult(
        folder=folder,
        imported=ours["imported"],
        error=ours["error"],
        nodes_expected=len(real["nodes"]),
        nodes_missing=sorted(set(real["nodes"]) - set(ours["nodes"])),
        extensions_missing=sorted(set(real["extensions"]) - set(ours["extensions"])),
        extensions_not_served=sorted(url for url, status in served.items() if status != 200),
        routes_differing=routes,
    )


def markdown_table(results: list[PackResult], real: dict[str, dict]) -> str:
    rows = [
        "| pack | imports on ComfyUI / here | nodes | JS files | routes | cases | note |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        ref = real[r.folder]
        nodes = f"{r.nodes_expected - len(r.nodes_missing)}/{r.nodes_expected}"
        js = f"{len(ref['extensions']) - len(r.extensions_missing) - len(r.extensions_not_served)}/{len(ref['extensions'])}"
        routes = f"{len(ref['routes']) - len(r.routes_differing)}/{len(ref['routes'])}"
        cases = f"{sum(c['ok'] for c in r.cases)}/{len(r.cases)}" if r.cases else "-"
        note = "" if ref["imported"] else f"fails on ComfyUI too: {ref['error']}"
        if r.nodes_missing:
            note = "missing " + ", ".join(r.nodes_missing[:3])
        elif r.error and ref["imported"]:
            note = r.error
        imports = f"{'yes' if ref['imported'] else 'no'} / {'yes' if r.imported else 'no'}"
        rows.append(
            f"| {r.folder} | {imports} | {nodes} | {js} | {routes} | {cases} | {note.replace('|', '/')[:110]} |"
        )
    return "\n".join(rows) + "\n"


# -- commands --------------------------------------------------------------------------------------------


def cmd_record(args: argparse.Namespace) -> int:
    folders = [p["folder"] for p in load_manifest()]
    registry = read_server(args.url.rstrip("/"), args.packs, folders, args.log.read_text(errors="replace"))
    FIXTURES.mkdir(parents=True, exist_ok=True)
    out = FIXTURES / "registry.json"
    out.write_text(
        json.dumps(
            {"comfyui": json.loads(MANIFEST.read_text())["comfyui"], "packs": registry}, indent=1, sort_keys=True
        )
        + "\n"
    )
    imported = sum(r["imported"] for r in registry.values())
    print(
        f"{out}: {imported}/{len(registry)} packs import on ComfyUI, "
        f"{sum(len(r['nodes']) for r in registry.values())} nodes"
    )
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    manifest = load_manifest()
    folders = [p["folder"] for p in manifest if not args.only or p["folder"] in args.only]
    missing = [f for f in folders if not (args.packs / f).is_dir()]
    if missing:
        raise SystemExit(f"not in {args.packs}: {', '.join(missing)} (clone each at the manifest's commit)")
    real = json.loads((FIXTURES / "registry.json").read_text())["packs"]
    installs = install_requirements(args.packs, folders) if args.install else {}
    workspace = Path(tempfile.mkdtemp(prefix="packs-check-"))
    server = start_our_server(args.packs, workspace, args.wait, args.server_arg or [])
    try:
        ours = read_server(server.base, args.packs, folders, server.log_text())
        results = []
        for folder in folders:
            served = {url: http_get(server.base, url)[0] for url in ours[folder]["extensions"]}
            result = compare(folder, real[folder], ours[folder], served)
            result.requirements = installs.get(folder, "")
            if result.imported:
                result.cases = run_cases(server.base, folder)
            results.append(result)
            print(
                f"{folder}: {'works' if result.works else 'FAILS'}"
                f"{'' if result.imported else ' (' + str(result.error) + ')'}",
                flush=True,
            )
    finally:
        server.stop()
        if not args.keep:
            shutil.rmtree(workspace, ignore_errors=True)
    works = sum(r.works for r in results)
    print(f"\n{works}/{len(results)} packs work as on ComfyUI 0.3.64 ({sum(r.imported for r in results)} import)")
    if args.report:
        args.report.write_text(json.dumps([asdict(r) | {"works": r.works} for r in results], indent=1) + "\n")
    if args.markdown:
        args.markdown.write_text(markdown_table(results, real))
    return 0 if works == len(results) else 1


def cmd_table(args: argparse.Namespace) -> int:
    real = json.loads((FIXTURES / "registry.json").read_text())["packs"]
    fields = set(PackResult.__dataclass_fields__)
    results = [PackResult(**{k: v for k, v in r.items() if k in fields}) for r in json.loads(args.report.read_text())]
    sys.stdout.write(markdown_table(results, real))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="record what a running real ComfyUI does with the packs")
    rec.add_argument("packs", type=Path)
    rec.add_argument("--url", required=True)
    rec.add_argument("--log", type=Path, required=True, help="that ComfyUI's startup log")
    chk = sub.add_parser("check", help="start our server with the packs and compare")
    chk.add_argument("packs", type=Path)
    chk.add_argument("--install", action="store_true", help="install each pack's requirements first")
    chk.add_argument("--only", nargs="*", help="these pack folders only")
    chk.add_argument("--report", type=Path)
    chk.add_argument("--markdown", type=Path)
    chk.add_argument("--wait", type=float, default=900.0, help="seconds to wait for the server to start")
    chk.add_argument("--keep", action="store_true", help="keep the workspace (and its server.log)")
    chk.add_argument("--server-arg", action="append", help="one more argument for `serve`")
    tab = sub.add_parser("table", help="docs/packs.md's table from a saved --report")
    tab.add_argument("report", type=Path)
    args = ap.parse_args(argv)
    return {"record": cmd_record, "check": cmd_check, "table": cmd_table}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
