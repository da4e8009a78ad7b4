"""A pack's requirements.txt is installed with the environment's torch pinned, and anything that would
replace torch is refused before pip installs a thing. pip runs in a throwaway virtual environment that
sees this one's packages (torch included), with wheels made here and no package index."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from comfy_bridge.packs.manage import install_pack, list_packs
from comfy_bridge.packs.pip_guard import TorchReplacement, constraints, install_requirements, installed_torch_family
from nodes.workspace import Workspace


def make_wheel(folder: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> Path:
    """A minimal pure-Python wheel: one module reporting its version, and its dependencies."""
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f"VERSION = {version!r}\n",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        + "".join(f"Requires-Dist: {r}\n" for r in requires),
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{dist}/RECORD"] = "".join(f"{path},,\n" for path in [*files, f"{dist}/RECORD"])
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as whl:
        for member, text in files.items():
            whl.writestr(member, text)
    return path


def running_site_dirs() -> list[str]:
    """The site-packages folders of the interpreter running the tests, in its search order: a
    virtualenv's own first (its torch), then, with --system-site-packages, its base interpreter's."""
    return [path for path in sys.path if Path(path).name in ("site-packages", "dist-packages")]


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> str:
    """A virtual environment over this one's site-packages (torch visible), whose installs stay its own.

    `venv --system-site-packages` alone exposes the base interpreter's site-packages, not those of a
    virtualenv the tests run in (where torch is), so a .pth file in the new environment adds the
    running interpreter's site folders after its own."""
    root = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(root)], check=True)
    python = str(root / "bin" / "python")
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(purelib, "running_environment.pth").write_text("".join(d + "\n" for d in running_site_dirs()))
    subprocess.run([python, "-m", "pip", "--version"], check=True, capture_output=True)
    return python


def test_the_venv_sees_the_running_torch_and_installs_into_itself(venv):
    """The same torch as the tests' interpreter (a virtualenv's own when they run in one), and the
    environment's own site-packages first on its path, where pip installs."""
    import torch

    found = subprocess.run(
        [
            venv,
            "-c",
            "import json, sys, sysconfig, torch; print(torch.__file__); "
            "print(sysconfig.get_path('purelib')); print(json.dumps(sys.path))",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    assert Path(found[0]).resolve() == Path(torch.__file__).resolve()
    own = found[1]
    assert own.startswith(str(Path(venv).parent.parent))
    paths = json.loads(found[2])
    assert paths.index(own) < min(paths.index(d) for d in running_site_dirs())


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("wheels")
    make_wheel(folder, "tinydep", "1.0", ("torch>=2",))
    make_wheel(folder, "oldtorchdep", "1.0", ("torch<2",))
    make_wheel(folder, "torchaudio", "0.0.1")
    make_wheel(folder, "wantsaudio", "1.0", ("torchaudio",))
    return folder


def offline(wheels: Path) -> list[str]:
    return ["--no-index", "--find-links", str(wheels)]


def requirements(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "requirements.txt"
    path.write_text("".join(line + "\n" for line in lines))
    return path


def importable(python: str, module: str) -> bool:
    return subprocess.run([python, "-c", f"import {module}"], capture_output=True).returncode == 0


def test_constraints_pin_the_installed_torch(venv):
    import torch

    family = installed_torch_family(venv)
    assert family["torch"].split("+")[0] == torch.__version__.split("+")[0]
    assert f"torch=={family['torch']}\n" in constraints(family)


def test_installs_requirements_and_keeps_torch(venv, wheels, tmp_path):
    before = installed_torch_family(venv)
    assert not importable(venv, "tinydep")
    done = install_requirements(requirements(tmp_path, "tinydep"), venv, offline(wheels))
    assert done == ["tinydep==1.0"]
    assert importable(venv, "tinydep")
    assert installed_torch_family(venv) == before


@pytest.mark.parametrize("line", ["torch==2.0.1", "torch<2", "torch @ https://example.invalid/torch.whl"])
def test_a_requirement_for_another_torch_is_refused_before_pip_runs(venv, tmp_path, line):
    # No index arguments: were pip to run, it would try the network; the refusal comes first.
    with pytest.raises(TorchReplacement, match="conflicts with the installed torch"):
        install_requirements(requirements(tmp_path, "msgspec", line), venv)


def test_a_torch_family_member_that_is_not_installed_is_refused(venv, tmp_path):
    assert "torchvision" not in installed_torch_family(venv)
    with pytest.raises(TorchReplacement, match="would install torchvision"):
        install_requirements(requirements(tmp_path, "torchvision>=0.1"), venv)


def test_a_dependency_that_needs_another_torch_is_refused(venv, wheels, tmp_path):
    with pytest.raises(TorchReplacement, match="torch kept") as err:
        install_requirements(requirements(tmp_path, "oldtorchdep"), venv, offline(wheels))
    assert "oldtorchdep" in str(err.value)
    assert not importable(venv, "oldtorchdep")


def test_a_torch_family_member_pulled_in_by_a_dependency_is_refused(venv, wheels, tmp_path):
    with pytest.raises(TorchReplacement, match="would install torchaudio==0.0.1"):
        install_requirements(requirements(tmp_path, "wantsaudio"), venv, offline(wheels))
    assert not importable(venv, "wantsaudio") and not importable(venv, "torchaudio")


def test_install_pack_with_refused_requirements_installs_nothing(venv, wheels, tmp_path):
    ws = Workspace(tmp_path / "ws").create()
    pack = tmp_path / "src" / "greedy_pack"
    pack.mkdir(parents=True)
    (pack / "__init__.py").write_text("NODE_CLASS_MAPPINGS = {}\n")
    (pack / "requirements.txt").write_text("tinydep\ntorch==1.13.1\n")
    with pytest.raises(TorchReplacement):
        install_pack(ws, str(pack), python=venv, pip_args=offline(wheels))
    assert list_packs(ws) == [] and list((ws.root / "custom_nodes").iterdir()) == []


def test_cli_reports_the_refusal(wheels, tmp_path, capsys):
    from comfy_bridge.cli import main

    pack = tmp_path / "src" / "vision_pack"
    pack.mkdir(parents=True)
    (pack / "__init__.py").write_text("NODE_CLASS_MAPPINGS = {}\n")
    (pack / "requirements.txt").write_text("torchvision\n")
    # offline: `nodes install` first looks for the torchvision of torch's build, which needs PyTorch's index
    code = main(["nodes", "install", str(pack), "--workspace", str(tmp_path / "ws"), "--pip-arg=--no-index"])
    assert code == 1
    err = capsys.readouterr().err
    assert err.startswith("refused:") and "torchvision" in err
    assert not (tmp_path / "ws" / "custom_nodes" / "vision_pack").exists()


def test_pip_runs_a_pack_starts_while_loading_cannot_replace_torch(venv, wheels, tmp_path, monkeypatch):
    """ComfyUI-Manager's startup script and some packs run pip themselves while they load; the loader pins
    the torch family for them through PIP_CONSTRAINT, keeping constraints the user had set."""
    import torch

    from comfy_bridge.packs.pip_guard import guard_pack_installs_at_runtime

    mine = tmp_path / "mine.txt"
    mine.write_text("numpy<3\n")
    environ = {"PIP_CONSTRAINT": str(mine)}
    pins = guard_pack_installs_at_runtime(environ)
    assert environ["PIP_CONSTRAINT"] == f"{mine} {pins}"
    assert f"torch=={torch.__version__}\n" in pins.read_text()
    make_wheel(wheels, "torch", "0.0.1")
    plan = subprocess.run(
        [venv, "-m", "pip", "install", "--dry-run", *offline(wheels), "torch==0.0.1"],
        capture_output=True,
        text=True,
        env={**os.environ, **environ},
    )
    assert plan.returncode != 0 and "torch==0.0.1" in plan.stdout + plan.stderr


def test_nvml_bindings_are_not_a_torch_build():
    """nvidia-ml-py (Crystools, ReActor) is pure Python and fits any torch; CUDA runtime wheels stay guarded."""
    from comfy_bridge.packs.pip_guard import guarded

    assert not guarded("nvidia-ml-py") and not guarded("nvidia_ml_py3")
    assert guarded("nvidia-cublas-cu12") and guarded("torchvision")
