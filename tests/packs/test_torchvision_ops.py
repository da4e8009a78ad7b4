"""A torchvision built for another torch build (the default index's CUDA wheel beside a CPU torch) fails at
import on its undefined ops; before packs load, their schemas are declared so packs can import it and use
its transforms. Run in a child process: op schemas are process-wide. The stand-in package fails as the real
wheel does (a fake kernel registered for `torchvision::nms`, which its unloadable C extension would define)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

STAND_IN = textwrap.dedent("""
    import torch

    @torch.library.register_fake("torchvision::nms")
    def _meta_nms(dets, scores, iou_threshold):
        return dets.new_empty(0, dtype=torch.long)

    @torch.library.register_fake("torchvision::qnms")
    def _meta_qnms(qdets, scores, iou_threshold):
        return qdets.new_empty(0, dtype=torch.long)

    from . import transforms
""")


def _run(tmp_path: Path, code: str) -> subprocess.CompletedProcess:
    package = tmp_path / "site" / "torchvision"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(STAND_IN)
    (package / "transforms.py").write_text("def halve(t):\n    return t * 0.5\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(REPO)])}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, timeout=300
    )


def test_the_stand_in_fails_to_import_as_the_real_wheel_does(tmp_path):
    done = _run(tmp_path, "import torchvision")
    assert done.returncode != 0 and "operator torchvision::nms does not exist" in done.stderr


def test_packs_import_torchvision_once_comfyui_modules_are_set_up(tmp_path):
    done = _run(
        tmp_path,
        """
        from comfy_bridge import compat
        compat.import_as_comfyui_has()          # what the server and executors do before packs load
        import torch, torchvision
        from torchvision import transforms
        print(transforms.halve(torch.ones(2)).tolist())
        print(torch.ops.torchvision.nms.default._schema)
    """,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "[0.5, 0.5]"
    assert "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor" in done.stdout
    assert "without its compiled ops" in done.stderr  # and the user is told how to get them


def test_an_executor_imports_it_before_its_warm_up(tmp_path):
    # what `serve` starts: an executor imports its providers, then warms the SD model code up, whose imports reach
    # torchvision (diffusers' LoRA loader -> transformers' image utilities); before, that import failed and no
    # executor registered, so `serve` never became ready
    done = _run(
        tmp_path,
        """
        from cluster.executor.providers import add_providers, load_providers
        add_providers("nodes.modelfns", "comfy_bridge.packs.pack_node")
        load_providers()  # what warm_up_all does before it warms up
        import torchvision
        print(torchvision.transforms.halve(2))
    """,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == "1.0"


def test_build_registry_declares_the_schemas_before_the_core_nodes_load(monkeypatch):
    """Core nodes import transformers' models (Qwen-Image's text encoder), which import an installed torchvision:
    with such a torchvision, build_registry failed in _core_nodes before packs (and the schemas) came."""
    from comfy_bridge import registry
    from comfy_bridge.packs import torchvision_ops

    order: list[str] = []
    monkeypatch.setattr(torchvision_ops, "make_torchvision_importable", lambda: order.append("schemas"))
    monkeypatch.setattr(registry, "_core_nodes", lambda: (order.append("core nodes"), ({}, {}))[1])
    registry.build_registry(None, load_custom_nodes=False)
    assert order[:2] == ["schemas", "core nodes"]
