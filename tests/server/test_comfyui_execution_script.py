"""scripts/run_comfyui_execution_tests.sh on a stand-in ComfyUI (a git repository laid out as ComfyUI's
suite is, whose tests start no server): the test process builds prompts with the checkout's own
comfy_execution.graph_utils, timing checks are on unless asked off, the servers it would start do not
inherit that module, and the result file records the ComfyUI commit read from git, the version, the
load average and every test's outcome, failures included. From a work tree and from a git directory
without one (what the `fetch` tool brings) at a given ref."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "run_comfyui_execution_tests.sh"

FAKE = {
    "pytest.ini": "[pytest]\npythonpath = .\n",
    "comfyui_version.py": '__version__ = "9.8.7"\n',
    "tests/__init__.py": "",
    "tests/conftest.py": textwrap.dedent("""
        import pytest

        def pytest_addoption(parser):
            parser.addoption("--output_dir", default="out")
            parser.addoption("--listen", default="127.0.0.1")
            parser.addoption("--port", type=int, default=8188)
            parser.addoption("--skip-timing-checks", action="store_true", default=False)

        @pytest.fixture(scope="session")
        def skip_timing_checks(pytestconfig):
            return pytestconfig.getoption("--skip-timing-checks")
    """),
    "comfy_execution/graph_utils.py": 'ORIGIN = "the stand-in ComfyUI checkout"\n',
    "tests/execution/test_execution.py": textwrap.dedent("""
        import os
        from comfy_execution.graph_utils import ORIGIN

        def test_helpers_come_from_the_checkout():
            assert ORIGIN == "the stand-in ComfyUI checkout"

        def test_servers_started_here_would_not_import_them():
            assert "comfyui-exec-tests" not in os.environ.get("PYTHONPATH", "")

        def test_timing_checks(skip_timing_checks):
            assert not skip_timing_checks, "timing checks are off"

        def test_deliberately_failing():
            assert False, "deliberately failing case"
    """),
    "tests/execution/test_async_nodes.py": "def test_async_stand_in():\n    pass\n",
    "tests/execution/test_progress_isolation.py": "def test_progress_stand_in():\n    pass\n",
    "tests/execution/extra_model_paths.yaml": "",
    "tests/execution/testing_nodes/testing-pack/__init__.py": "NODE_CLASS_MAPPINGS = {}\n",
}


def _git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


def _stand_in(tmp_path: Path) -> tuple[Path, str]:
    root = tmp_path / "ComfyUI"
    for name, text in FAKE.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "stand-in")
    return root, _git(root, "rev-parse", "HEAD")


def _run(source: Path, result: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(SCRIPT), str(source), "--result", str(result), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _outcomes(result: Path) -> dict:
    data = json.loads(result.read_text())
    return data, {t["id"].rsplit("::", 1)[1]: t for t in data["tests"]}


def test_a_work_tree_run_records_every_outcome_with_timing_checks_on(tmp_path):
    root, commit = _stand_in(tmp_path)
    result = tmp_path / "result.json"
    run = _run(root, result)
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]  # the deliberate failure
    data, tests = _outcomes(result)
    assert data["comfyui"]["commit"] == commit and data["comfyui"]["version"] == "9.8.7"
    assert data["timing_checks"] == "on" and data["pytest_exit_code"] == 1 and data["all_passed"] is False
    assert data["server_state_db"] == "memory"
    assert data["summary"] == {"passed": 5, "failed": 1, "error": 0, "skipped": 0, "total": 6}
    assert tests["test_helpers_come_from_the_checkout"]["outcome"] == "passed"
    assert tests["test_servers_started_here_would_not_import_them"]["outcome"] == "passed"
    assert tests["test_timing_checks"]["outcome"] == "passed"
    failed = tests["test_deliberately_failing"]
    assert failed["outcome"] == "failed" and "deliberately failing case" in failed["message"]
    assert data["figure"] == {"passed": 5, "total": 6} and data["commit"] == _git(REPO, "rev-parse", "HEAD")
    assert len(data["load_average"]["start"]) == 3 and data["machine"]["cpus"] == os.cpu_count()
    assert data["command"].startswith("scripts/run_comfyui_execution_tests.sh ")
    assert not (REPO / "tests" / "execution").exists()  # the link is gone


def test_a_git_directory_runs_the_given_ref_and_timing_checks_can_be_skipped_on_record(tmp_path):
    root, first = _stand_in(tmp_path)
    (root / "comfyui_version.py").write_text('__version__ = "9.8.8"\n')
    _git(root, "commit", "-q", "-am", "later")
    bare = tmp_path / "mirror.git"
    _git(tmp_path, "clone", "-q", "--bare", str(root), str(bare))
    result = tmp_path / "result.json"
    run = _run(bare, result, "--ref", first, "--skip-timing-checks", "-k", "timing")
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    data, tests = _outcomes(result)
    assert data["comfyui"] == {
        "commit": first,
        "version": "9.8.7",
        "client_helpers": f"comfy_execution/graph_utils.py of {first}",
    }
    assert data["timing_checks"] == "off" and "--skip-timing-checks" in data["command"]
    assert list(tests) == ["test_timing_checks"] and "timing checks are off" in tests["test_timing_checks"]["message"]
