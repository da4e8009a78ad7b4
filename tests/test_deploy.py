"""The files in deploy/ start only commands our CLI accepts: every `comfy-cluster` command line in the
Kubernetes manifests (containers, init containers, `sh -c` scripts) and the Dockerfile's entry point
parses with `comfy-cluster`'s own parser (no unknown flag), and the executors join the port the head
listens on, through the Service."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import yaml

from comfy_bridge.cli import build_parser

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
MANIFESTS = sorted(DEPLOY.rglob("*.yaml"))


def _pod_specs(doc: dict) -> list[dict]:
    """The pod specs of a Deployment, or of a KubeRay RayCluster's head and worker groups."""
    spec = doc.get("spec", {})
    if doc.get("kind") == "RayCluster":
        groups = [spec["headGroupSpec"], *spec.get("workerGroupSpecs", [])]
        return [g["template"]["spec"] for g in groups]
    return [spec.get("template", {}).get("spec", {})]


def _containers(doc: dict) -> list[dict]:
    return [c for pod in _pod_specs(doc) for c in pod.get("initContainers", []) + pod.get("containers", [])]


def _command_lines(argv: list[str]) -> list[list[str]]:
    """The `comfy-cluster` command lines `argv` runs: itself, or those of its `sh -c` script."""
    if argv[:2] == ["sh", "-c"]:
        lines = []
        for part in re.split(r"\|\||&&|;|\|", argv[2]):
            words = shlex.split(part)
            if words and words[0] == "comfy-cluster":
                lines.append(words)
        return lines
    return [argv] if argv and argv[0] == "comfy-cluster" else []


def _accepts(argv: list[str]) -> None:
    try:
        build_parser().parse_args(argv[1:])
    except SystemExit as e:
        pytest.fail(f"comfy-cluster does not accept: {shlex.join(argv)} (exit {e.code})")


def ray_version() -> str:
    tomllib = pytest.importorskip("tomllib")
    extras = tomllib.loads((DEPLOY.parent / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    (pin,) = extras["ray"]
    return pin.split("==")[1]


def _flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_there_is_something_to_check():
    assert MANIFESTS and (DEPLOY / "Dockerfile").exists()


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: str(p.relative_to(DEPLOY)))
def test_every_command_in_a_manifest_is_one_the_cli_accepts(path):
    lines = [
        line
        for doc in yaml.safe_load_all(path.read_text())
        if doc
        for c in _containers(doc)
        for line in _command_lines(c.get("command", []) + c.get("args", []))
    ]
    assert lines, f"{path} starts no comfy-cluster command"
    for argv in lines:
        _accepts(argv)


def test_the_executors_join_the_head_through_its_service():
    docs = [d for d in yaml.safe_load_all((DEPLOY / "kubernetes" / "comfy-cluster.yaml").read_text()) if d]
    commands = [
        c["command"]
        for d in docs
        for c in _containers(d)
        if c.get("command", [])[:2] in (["comfy-cluster", "serve"], ["comfy-cluster", "executor"])
    ]
    (serve,) = [c for c in commands if c[1] == "serve"]
    executors = [c for c in commands if c[1] == "executor"]
    assert executors
    head_port = _flag(serve, "--head-address").rsplit(":", 1)[1]
    (service,) = [d for d in docs if d["kind"] == "Service"]
    ports = {str(p["port"]): str(p["targetPort"]) for p in service["spec"]["ports"]}
    for argv in executors:
        host, port = _flag(argv, "--head").removeprefix("tcp://").rsplit(":", 1)
        assert host == service["metadata"]["name"] and ports[port] == head_port


def test_the_dockerfile_entry_point_is_an_accepted_command():
    text = (DEPLOY / "Dockerfile").read_text()
    entry = json.loads(re.search(r"^ENTRYPOINT (\[.*\])$", text, re.M).group(1))
    cmd = json.loads(re.search(r"^CMD (\[.*\])$", text, re.M).group(1))
    assert entry == ["comfy-cluster"]
    _accepts(entry + cmd)


def test_the_raycluster_serves_beside_rays_head_and_its_workers_mount_the_models():
    docs = [d for d in yaml.safe_load_all((DEPLOY / "kuberay" / "comfy-cluster-raycluster.yaml").read_text()) if d]
    (ray_cluster,) = [d for d in docs if d["kind"] == "RayCluster"]
    head_pod = ray_cluster["spec"]["headGroupSpec"]["template"]["spec"]
    (serve,) = [c["command"] for c in head_pod["containers"] if c.get("command", [])[:2] == ["comfy-cluster", "serve"]]
    assert _flag(serve, "--ray").split(":")[-1] == "6379"  # Ray's GCS in the same pod
    low, high = map(int, _flag(serve, "--ray-autoscale").split(":"))  # executors within the GPU group's bounds
    (group,) = ray_cluster["spec"]["workerGroupSpecs"]
    assert (low, high) == (group["minReplicas"], group["maxReplicas"]) and ray_cluster["spec"][
        "enableInTreeAutoscaling"
    ]
    assert ray_cluster["spec"]["rayVersion"] == ray_version()  # the image's Ray (the ray extra's pin)
    models = {
        v["mountPath"] for c in head_pod["containers"] for v in c.get("volumeMounts", []) if v["name"] == "models"
    }
    for group in ray_cluster["spec"]["workerGroupSpecs"]:
        (worker,) = group["template"]["spec"]["containers"]
        assert "nvidia.com/gpu" in worker["resources"]["limits"]
        assert {v["mountPath"] for v in worker["volumeMounts"] if v["name"] == "models"} == models
