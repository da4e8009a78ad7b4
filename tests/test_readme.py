"""The README's commands run as written, so the README cannot drift from the CLI.

Every fenced code block in README.md is preceded, on the line just before its opening fence, by a marker
that says what this test does with it:

    <!-- readme-test: run -->             shell lines, run in order with bash (`set -e`) from the repository root,
                                          every `run` block of the README in one fresh workspace
                                          ($COMFY_CLUSTER_WORKSPACE points at an empty folder, so the commands
                                          need no --workspace); each must exit 0 within BLOCK_TIMEOUT_S
    <!-- readme-test: serve -->           a command that starts the server: started as written plus
                                          `--port N` (a free port) on its own fresh workspace; it must answer
                                          GET /system_stats within SERVE_START_S, then gets SIGTERM
    <!-- readme-test: client -->          Python run while that server answers, with `8188` replaced by its
                                          port; it must exit 0 and print the URL of an image
    <!-- readme-test: yaml -->            an extra_model_paths.yaml: put in a fresh workspace, whose folders
                                          must then include every folder it names
    <!-- readme-test: skip (REASON) -->   not run (installs, network, the whole suite, a picture); the reason
                                          is required

A block without a marker fails the test, so a command added to the README is either run here or skipped
with a stated reason. Also checked: the README is at most 200 lines, every relative link in it and in
docs/*.md resolves (headings included), and every figure in the headline table links to the docs page that
says how it was measured.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import sysconfig
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import free_port

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
MAX_LINES = 200
KINDS = {"run", "serve", "client", "yaml", "skip"}
MARKER = re.compile(r"^<!--\s*readme-test:\s*(\w+)\s*(?:\((.+)\))?\s*-->$")
BLOCK_TIMEOUT_S = 300
SERVE_START_S = 120  # a fresh workspace's first start builds the demo models; the 2-core machine is often loaded
STOP_S = 30


@dataclass
class Block:
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    kind: str | None
    reason: str | None


def readme_blocks() -> list[Block]:
    lines = README.read_text().split("\n")
    blocks, i = [], 0
    while i < len(lines):
        if lines[i].startswith("```"):
            start, lang = i, lines[i][3:].strip()
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            marker = MARKER.match(lines[start - 1].strip()) if start else None
            blocks.append(
                Block(
                    start + 1,
                    lang,
                    "\n".join(lines[start + 1 : j]),
                    marker.group(1) if marker else None,
                    marker.group(2) if marker else None,
                )
            )
            i = j + 1
        else:
            i += 1
    return blocks


def of_kind(kind: str) -> list[Block]:
    return [b for b in readme_blocks() if b.kind == kind]


def command_env(workspace: Path) -> dict[str, str]:
    """The user's shell after `pip install -e .`: the interpreter's scripts on PATH, a fresh workspace."""
    env = dict(os.environ)
    scripts = [sysconfig.get_path("scripts"), str(Path(sys.executable).parent)]
    env["PATH"] = os.pathsep.join(scripts + [env.get("PATH", "")])
    env["COMFY_CLUSTER_WORKSPACE"] = str(workspace)
    env.pop("COMFY_CLUSTER_STATE_DB", None)
    return env


def gh_slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {gh_slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.+)$", text, flags=re.M)}


def links(text: str) -> list[str]:
    return re.findall(r"\]\(([^)\s]+)\)", text)


# -- the shape of the README ---------------------------------------------------------------------------


def test_readme_is_at_most_200_lines():
    n = len(README.read_text().splitlines())
    assert n <= MAX_LINES, f"README.md has {n} lines; the internals belong in docs/"


def test_every_code_block_says_whether_it_is_run():
    bad = [
        f"line {b.line}: no `<!-- readme-test: ... -->` marker just before the fence"
        for b in readme_blocks()
        if b.kind is None
    ]
    bad += [f"line {b.line}: unknown kind {b.kind!r}" for b in readme_blocks() if b.kind and b.kind not in KINDS]
    bad += [
        f"line {b.line}: a skipped block needs a reason: `skip (why)`"
        for b in readme_blocks()
        if b.kind == "skip" and not b.reason
    ]
    assert not bad, "\n".join(bad)
    assert of_kind("run") and of_kind("serve") and of_kind("client"), "the README's quickstart is no longer tested"


@pytest.mark.parametrize("doc", [README, *sorted((REPO / "docs").glob("*.md"))], ids=lambda p: p.name)
def test_relative_links_resolve(doc):
    """The README's links and those of the docs pages (the internals moved there from the README)."""
    broken = []
    text = re.sub(r"```.*?```", "", doc.read_text(), flags=re.S)
    for target in links(text):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        page = doc if not path else (doc.parent / path).resolve()
        if not page.exists():
            broken.append(f"{target}: no such file")
        elif anchor and page.suffix == ".md" and anchor not in anchors(page):
            broken.append(f"{target}: no heading #{anchor} in {page.relative_to(REPO)}")
    assert not broken, "\n".join(broken)


def test_headline_figures_link_to_the_docs_page_that_measures_them():
    section = README.read_text().split("## Headline figures", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|") and not set(line) <= set("|-: ")][1:]
    assert rows, "the headline table is gone"
    for row in rows:
        figure = row.strip("|").split("|")[-1]
        targets = links(figure)
        assert targets, f"a figure without a link to how it was measured: {row}"
        for target in targets:
            path, _, anchor = target.partition("#")
            assert path.startswith("docs/") and path.endswith(".md"), f"{target}: figures link to docs pages"
            page = REPO / path
            assert page.exists(), f"{target}: no such page"
            assert not anchor or anchor in anchors(page), f"{target}: no heading #{anchor} in {path}"


# -- the commands, as written ---------------------------------------------------------------------------


def test_run_blocks_work_as_written_on_a_fresh_workspace(tmp_path):
    workspace = tmp_path / "workspace"
    env = command_env(workspace)
    for block in of_kind("run"):
        script = "set -euo pipefail\n" + block.text
        done = subprocess.run(
            ["bash", "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S
        )
        assert done.returncode == 0, (
            f"README line {block.line} failed ({done.returncode}):\n{block.text}\n"
            f"--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
        )
        if "comfy-cluster run " in block.text:
            assert ".png" in done.stdout, f"README line {block.line} printed no image:\n{done.stdout[-2000:]}"
    assert (workspace / "models" / "checkpoints" / "sd1-tiny.safetensors").exists()


def test_yaml_blocks_are_extra_model_paths_the_workspace_reads(tmp_path):
    import yaml

    from nodes.workspace import Workspace

    for block in of_kind("yaml"):
        root = tmp_path / f"ws{block.line}"
        root.mkdir()
        (root / "extra_model_paths.yaml").write_text(block.text)
        ws = Workspace(root).create()  # not activated: the test changes no global state
        for section in yaml.safe_load(block.text).values():
            base = Path(section["base_path"])
            for key, value in section.items():
                if key in ("base_path", "is_default"):
                    continue
                wanted = base / str(value).strip()
                assert wanted in ws.folder_paths(key), f"README line {block.line}: {key} -> {wanted} not read"
                if section.get("is_default"):
                    assert ws.folder_paths(key)[0] == wanted, f"README line {block.line}: is_default not first"


def test_serve_answers_and_the_client_code_runs_against_it(tmp_path):
    serve_block = of_kind("serve")[0]
    command = [line for line in serve_block.text.splitlines() if line.strip() and not line.startswith("#")]
    assert len(command) == 1, "a serve block is one command"
    port = free_port()
    env = command_env(tmp_path / "workspace")
    log_path = tmp_path / "serve.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            ["bash", "-c", f"exec {command[0]} --port {port}"],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + SERVE_START_S
        while True:
            try:
                stats = urllib.request.urlopen(base + "/system_stats", timeout=2).read()
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    pytest.fail(
                        f"README line {serve_block.line}: `{command[0]}` did not answer /system_stats "
                        f"within {SERVE_START_S} s:\n{log_path.read_text()[-4000:]}"
                    )
                time.sleep(0.5)
        assert b"system" in stats
        started = log_path.read_text()  # serve says where the workspace and its model folders are
        workspace = (tmp_path / "workspace").resolve()
        assert (
            f"Workspace: {workspace}" in started and f"checkpoints: {workspace / 'models' / 'checkpoints'}" in started
        )
        for block in of_kind("client"):
            code = block.text.replace("8188", str(port))
            done = subprocess.run(
                [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S
            )
            assert done.returncode == 0, (
                f"README line {block.line} failed:\n--- stdout\n{done.stdout[-2000:]}\n"
                f"--- stderr\n{done.stderr[-3000:]}\n--- server\n"
                f"{log_path.read_text()[-3000:]}"
            )
            assert "/view?filename=" in done.stdout, f"README line {block.line} printed no image:\n{done.stdout}"
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(STOP_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
