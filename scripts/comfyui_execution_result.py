"""The result file of scripts/run_comfyui_execution_tests.sh: ComfyUI's execution suite as run against our
server, from pytest's JUnit XML plus what the run was (command, ComfyUI commit, date, machine, load).

    python scripts/comfyui_execution_result.py JUNIT_XML OUT_JSON --command "..." --comfyui-commit SHA \
        --comfyui-version 0.3.64 --helpers PATH --started ISO --load-before "1.0 0.9 0.8" --exit-code N
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
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


def _our_commit(repo: Path) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip() + ("+uncommitted-changes" if dirty else "")


def machine() -> dict:
    return {"hostname": platform.node(), "platform": platform.platform(), "python": sys.version.split()[0],
            "cpus": os.cpu_count(), "processor": platform.processor() or platform.machine()}


def build(args: argparse.Namespace) -> dict:
    cases = outcomes(Path(args.junit_xml))
    counts = summary(cases)
    return {
        "what": "ComfyUI's own execution test suite (tests/execution) against Comfy Cluster's main.py",
        "command": args.command,
        "comfyui": {"commit": args.comfyui_commit, "version": args.comfyui_version,
                    "client_helpers": args.helpers},
        "comfy_cluster_commit": _our_commit(Path(__file__).resolve().parent.parent),
        "timing_checks": args.timing_checks,
        # where the servers kept queue and history ("memory": in the process, as ComfyUI does)
        "server_state_db": os.environ.get("COMFY_CLUSTER_STATE_DB"),
        "started": args.started,
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "load_average": {"before": [float(x) for x in args.load_before.split()],
                         "after": [round(x, 2) for x in os.getloadavg()]},
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
    parser.add_argument("--helpers", required=True,
                        help="where the test process's comfy_execution.graph_utils came from")
    parser.add_argument("--started", required=True)
    parser.add_argument("--load-before", required=True)
    parser.add_argument("--exit-code", type=int, required=True)
    parser.add_argument("--timing-checks", choices=("on", "off"), default="on")
    args = parser.parse_args(argv)
    result = build(args)
    Path(args.out_json).write_text(json.dumps(result, indent=1) + "\n")
    s = result["summary"]
    print(f"{args.out_json}: {s['passed']} passed, {s['failed']} failed, {s['error']} errors, "
          f"{s['skipped']} skipped of {s['total']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
