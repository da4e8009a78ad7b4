"""The result file of scripts/run_comfyui_execution_tests.sh: ComfyUI's execution suite as run against our
server, from pytest's JUnit XML plus what the run was (command, ComfyUI commit, date, machine, load).

    python scripts/comfyui_execution_result.py JUNIT_XML OUT_JSON --command "..." --comfyui-commit SHA \
        --comfyui-version 0.3.64 --helpers PATH --started EPOCH_S --load-before "1.0 0.9 0.8" --exit-code N
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path

OUTCOMES = ("passed", "failed", "error", "skipped")


def outcomes(junit_xml: Path) -> list[dict]:
    """One entry per test case: id (module.Class::name[params], as pytest's JUnit XML names it), outcome,
    seconds, and the first line of the failure's message where it did not pass."""
    cases = []
    for case in ET.parse(junit_xml).getroot().iter("testcase"):
        test_id = f"{case.get('classname', '')}::{case.get('name', '')}"
        outcome, message = "passed", None
        for tag, name in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
            found = case.find(tag)
            if found is not None:
                outcome = name
                message = (found.get("message") or found.text or "").strip().splitlines()[:1]
                message = message[0][:300] if message else ""
                break
        entry = {"id": test_id, "outcome": outcome, "seconds": round(float(case.get("time", 0) or 0), 3)}
        if message is not None:
            entry["message"] = message
        cases.append(entry)
    return cases


def summary(cases: list[dict]) -> dict[str, int]:
    counts = {name: 0 for name in OUTCOMES}
    for case in cases:
        counts[case["outcome"]] += 1
    counts["total"] = len(cases)
    return counts


def _git(repo: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip()


def machine() -> dict:
    """As cluster/bench/results.py describes the machine of a bench run."""
    return {
        "host": platform.node(),
        "system": platform.platform(),
        "cpu": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }


def build(args: argparse.Namespace) -> dict:
    """The result in the shape of the bench result files (cluster/bench/results.py: command, commit, dirty,
    date, duration_s, machine, load_average, figure), plus the suite's own fields."""
    cases = outcomes(Path(args.junit_xml))
    counts = summary(cases)
    repo = Path(__file__).resolve().parent.parent
    status = _git(repo, "status", "--porcelain", "--untracked-files=no")
    return {
        "bench": "comfyui_execution_suite",
        "what": "ComfyUI's own execution test suite (tests/execution) against Comfy Cluster's main.py",
        "command": args.command,
        "commit": _git(repo, "rev-parse", "HEAD"),
        "dirty": bool(status) if status is not None else None,
        "date": datetime.fromtimestamp(args.started, UTC).isoformat(timespec="seconds"),
        "duration_s": round(time.time() - args.started, 1),
        "machine": machine(),
        "load_average": {"start": [float(x) for x in args.load_before.split()], "end": list(os.getloadavg())},
        "figure": {"passed": counts["passed"], "total": counts["total"]},
        "comfyui": {"commit": args.comfyui_commit, "version": args.comfyui_version, "client_helpers": args.helpers},
        "timing_checks": args.timing_checks,
        # where the servers kept queue and history ("memory": in the process, as ComfyUI does)
        "server_state_db": os.environ.get("COMFY_CLUSTER_STATE_DB"),
        "pytest_exit_code": args.exit_code,
        "summary": counts,
        "all_passed": counts["total"] > 0 and counts["passed"] == counts["total"],
        "tests": cases,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit_xml")
    parser.add_argument("out_json")
    parser.add_argument("--command", required=True)
    parser.add_argument("--comfyui-commit", required=True)
    parser.add_argument("--comfyui-version", required=True)
    parser.add_argument(
        "--helpers", required=True, help="where the test process's comfy_execution.graph_utils came from"
    )
    parser.add_argument("--started", type=float, required=True, help="seconds since the epoch")
    parser.add_argument("--load-before", required=True)
    parser.add_argument("--exit-code", type=int, required=True)
    parser.add_argument("--timing-checks", choices=("on", "off"), default="on")
    args = parser.parse_args(argv)
    result = build(args)
    Path(args.out_json).write_text(json.dumps(result, indent=1) + "\n")
    s = result["summary"]
    print(
        f"{args.out_json}: {s['passed']} passed, {s['failed']} failed, {s['error']} errors, "
        f"{s['skipped']} skipped of {s['total']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
