"""Run the Comfy API v2 client tests (tests/tenancy/test_api_v2_sdk.py, the official comfy-sdk) against
the reference: comfy-api-proxy in front of real ComfyUI, with the test nodes of
tests/tenancy/reference/v2_reference_nodes.py loaded as a custom node. Records each test's outcome (and
the first line of a failure) as JSON, so docs/api-v2.md can say where the reference and we differ, and
the answers of the HTTP probes of tests/tenancy/api_v2_probes.py (beside it, *_probes.json), which
tests/tenancy/test_api_v2_matches_reference.py compares with ours.

    python scripts/api_v2_reference.py --comfyui-src /tmp/realcomfy/src \\
        --comfyui-python /tmp/realcomfy/venv/bin/python --comfyui-pythonpath /tmp/realcomfy/site \\
        --proxy /tmp/apiv2ref/pvenv/bin/comfy-api-proxy --comfyui-commit a125cd84... \\
        tests/tenancy/fixtures/api_v2_reference.json

Nothing of ComfyUI or the proxy is copied; both run from where they are installed."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import xml.etree.ElementTree as ET
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NODES = ROOT / "tests" / "tenancy" / "reference" / "v2_reference_nodes.py"
SUITE = "tests/tenancy/test_api_v2_sdk.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url: str, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited with {proc.returncode}")
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(url)


def outcomes(junit: Path) -> dict[str, dict]:
    results = {}
    for case in ET.parse(junit).iter("testcase"):
        outcome, message = "passed", None
        for tag in ("failure", "error", "skipped"):
            node = case.find(tag)
            if node is not None:
                outcome = {"failure": "failed"}.get(tag, tag)
                message = (node.get("message") or "").strip().splitlines()[0][:300] if node.get("message") else None
        results[case.get("name")] = {"outcome": outcome, "message": message}
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--comfyui-src", required=True, type=Path)
    ap.add_argument("--comfyui-python", required=True)
    ap.add_argument("--comfyui-pythonpath", default="")
    ap.add_argument("--comfyui-commit", required=True)
    ap.add_argument("--proxy", required=True, help="the comfy-api-proxy executable")
    ap.add_argument("out", type=Path)
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="api-v2-reference-"))
    base = work / "base"
    for sub in ("custom_nodes", "models", "input", "output", "temp", "user"):
        (base / sub).mkdir(parents=True)
    shutil.copy(NODES, base / "custom_nodes" / NODES.name)
    comfy_port, proxy_port = free_port(), free_port()
    env = {**os.environ, "PYTHONPATH": args.comfyui_pythonpath, "OMP_NUM_THREADS": "1"}
    comfy = subprocess.Popen(
        [
            args.comfyui_python,
            "main.py",
            "--cpu",
            "--listen",
            "127.0.0.1",
            "--port",
            str(comfy_port),
            "--base-directory",
            str(base),
            "--disable-auto-launch",
        ],
        cwd=args.comfyui_src,
        env=env,
        stdout=open(work / "comfyui.log", "wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    proxy = None
    try:
        wait_for(f"http://127.0.0.1:{comfy_port}/object_info/TStepSave", comfy, 180)
        proxy = subprocess.Popen(
            [
                args.proxy,
                "--comfyui",
                f"http://127.0.0.1:{comfy_port}",
                "--port",
                str(proxy_port),
                "--state-dir",
                str(work / "state"),
                "--comfyui-base-dir",
                str(base),
            ],
            stdout=open(work / "proxy.log", "wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        wait_for(f"http://127.0.0.1:{proxy_port}/api/v2/health", proxy, 60)
        junit = work / "junit.xml"
        subprocess.run(
            [sys.executable, "-m", "pytest", "-q", SUITE, "-p", "no:cacheprovider", f"--junitxml={junit}"],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT), "COMFY_V2_REFERENCE_URL": f"http://127.0.0.1:{proxy_port}"},
        )
        probes = asyncio.run(reference_probes(f"http://127.0.0.1:{proxy_port}"))
        record = {
            "suite": SUITE,
            "reference": {"comfy-api-proxy": proxy_version(args.proxy), "comfyui_commit": args.comfyui_commit},
            "comfy-sdk": metadata.version("comfy-sdk"),
            "tests": outcomes(junit),
        }
    finally:
        for proc in (proxy, comfy):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(30)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    probes_out = args.out.with_name(args.out.stem + "_probes.json")
    probes_out.write_text(json.dumps({"reference": record["reference"], "probes": probes}, indent=1) + "\n")
    print(json.dumps(record, indent=1))
    print(json.dumps(probes, indent=1))


async def reference_probes(base: str) -> dict:
    sys.path.insert(0, str(ROOT / "tests" / "tenancy"))
    import aiohttp
    from api_v2_probes import run_probes

    async with aiohttp.ClientSession(base_url=base) as session:
        return await run_probes(session)


def proxy_version(executable: str) -> str:
    python = Path(executable).with_name("python")
    out = subprocess.run(
        [str(python), "-c", "from importlib import metadata; print(metadata.version('comfy-api-proxy'))"],
        capture_output=True,
        text=True,
    )
    return out.stdout.strip() or "unknown"


if __name__ == "__main__":
    main()
