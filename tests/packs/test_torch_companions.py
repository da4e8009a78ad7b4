"""torchvision and spandrel, which packs import without listing them, come with `nodes install` as a ComfyUI
install has them: torchvision of the installed torch's own build (its `+cpu` label), never another build and
never another torch. pip runs in a throwaway virtual environment over this one (torch visible), offline."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from comfy_bridge.packs.pip_guard import TorchReplacement, installed_torch_family
from comfy_bridge.packs.torch_companions import install_comfyui_companions, matched_torchvision, needs_companions

from .test_requirements_guard import make_wheel, running_site_dirs


def _venv(root: Path) -> str:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(root)], check=True)
    python = str(root / "bin" / "python")
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(purelib, "running_environment.pth").write_text("".join(d + "\n" for d in running_site_dirs()))
    return python


def _wheels(folder: Path, torch: str, *torchvision_versions: str) -> list[str]:
    folder.mkdir()
    for version in torchvision_versions:
        make_wheel(folder, "torchvision", version, (f"torch=={torch.split('+')[0]}",))
    make_wheel(folder, "spandrel", "0.4.2", ("torch", "torchvision"))
    return ["--no-index", "--find-links", str(folder)]


def test_the_torchvision_of_each_torch_build():
    assert matched_torchvision("2.13.0+cpu") == ("torchvision==0.28.*", "https://download.pytorch.org/whl/cpu")
    assert matched_torchvision("2.13.0+cu128") == ("torchvision==0.28.*", "https://download.pytorch.org/whl/cu128")
    assert matched_torchvision("2.8.0") == ("torchvision==0.23.*", None)


def test_packs_that_use_them_are_told_apart(tmp_path):
    uses = tmp_path / "uses"
    uses.mkdir()
    (uses / "__init__.py").write_text("import os\nimport torchvision.transforms as T\n")
    lists = tmp_path / "lists"
    lists.mkdir()
    (lists / "__init__.py").write_text("x = 1\n")
    (lists / "requirements.txt").write_text("einops\nspandrel>=0.3\n")
    plain = tmp_path / "plain.py"
    plain.write_text("# torchvision is not used here\nimport einops\n")
    assert needs_companions(uses) and needs_companions(lists) and not needs_companions(plain)


def test_the_matching_build_is_installed_then_spandrel_and_torch_is_kept(tmp_path):
    torch = installed_torch_family()["torch"]
    if "+" not in torch:
        pytest.skip(f"torch {torch} has no build label to match")
    label = torch.split("+")[1]
    python = _venv(tmp_path / "venv")
    offline = _wheels(tmp_path / "wheels", torch, "0.28.0", f"0.28.0+{label}")
    installed = install_comfyui_companions(python, offline, index_url="")
    assert installed == [f"torchvision==0.28.0+{label}", "spandrel==0.4.2"]
    assert installed_torch_family(python) == {"torch": torch, "torchvision": f"0.28.0+{label}"}


def test_another_build_is_refused_and_nothing_installed(tmp_path):
    torch = installed_torch_family()["torch"]
    if "+" not in torch:
        pytest.skip(f"torch {torch} has no build label to match")
    python = _venv(tmp_path / "venv")
    offline = _wheels(tmp_path / "wheels", torch, "0.28.0")  # the default index's build only
    with pytest.raises(TorchReplacement, match=r"not the torchvision built for torch .*torchvision==0\.28\.\*"):
        install_comfyui_companions(python, offline, index_url="")
    assert installed_torch_family(python) == {"torch": torch}
