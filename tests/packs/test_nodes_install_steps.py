"""`nodes install` as ComfyUI-Manager installs a pack: requirements line by line when the file as a whole fails
(WAS Node Suite's `git+https://` lines offline), cv2 for packs that import it unlisted (ComfyUI-Allor), and the
pack's install.py run with the torch family pinned (Impact-Pack, ReActor). pip runs offline in the throwaway
venv of test_requirements_guard, with wheels made here."""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

import pytest

from comfy_bridge.packs.manage import install_pack
from comfy_bridge.packs.pip_guard import installed_torch_family
from nodes.workspace import Workspace
from tests.packs.test_requirements_guard import importable, make_wheel, offline, venv  # noqa: F401  (fixture)


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("wheels")
    make_wheel(folder, "tinydep", "1.0", ("torch>=2",))
    # OpenCV's headless wheel under its own distribution name, providing the cv2 module
    dist = "opencv_python_headless-4.0.dist-info"
    files = {
        "cv2/__init__.py": "VERSION = '4.0'\n",
        f"{dist}/METADATA": "Metadata-Version: 2.1\nName: opencv-python-headless\nVersion: 4.0\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{dist}/RECORD"] = "".join(f"{path},,\n" for path in [*files, f"{dist}/RECORD"])
    with zipfile.ZipFile(folder / "opencv_python_headless-4.0-py3-none-any.whl", "w") as whl:
        for member, text in files.items():
            whl.writestr(member, text)
    return folder


def make_pack(tmp_path: Path, name: str, requirements: str = "", code: str = "", script: str = "") -> Path:
    pack = tmp_path / "src" / name
    pack.mkdir(parents=True)
    (pack / "__init__.py").write_text(code + "NODE_CLASS_MAPPINGS = {}\n")
    if requirements:
        (pack / "requirements.txt").write_text(requirements)
    if script:
        (pack / "install.py").write_text(script)
    return pack


def test_an_unreachable_requirement_keeps_only_itself_out(venv, wheels, tmp_path):  # noqa: F811
    ws = Workspace(tmp_path / "ws").create()
    pack = make_pack(tmp_path, "was_like", "git+https://github.invalid/nobody/img2texture.git\ntinydep\n")
    notes: list[str] = []
    entry, installed = install_pack(ws, str(pack), python=venv, pip_args=offline(wheels), notes=notes)
    assert entry.path.is_dir() and installed == ["tinydep==1.0"] and importable(venv, "tinydep")
    assert len(notes) == 1
    assert notes[0].startswith(
        "requirement 'git+https://github.invalid/nobody/img2texture.git' could not be installed: "
    )


def test_cv2_imported_unlisted_is_installed_only_for_a_pack_that_imports_it(venv, wheels, tmp_path):  # noqa: F811
    ws = Workspace(tmp_path / "ws").create()
    assert not importable(venv, "cv2")
    plain = make_pack(tmp_path, "no_cv2", code="import os\n")
    assert install_pack(ws, str(plain), python=venv, pip_args=offline(wheels))[1] == []
    allor = make_pack(tmp_path, "allor_like", code="import cv2  # not in any requirements.txt\n")
    notes: list[str] = []
    assert install_pack(ws, str(allor), python=venv, pip_args=offline(wheels), notes=notes)[1] == [
        "opencv-python-headless==4.0"
    ]
    assert importable(venv, "cv2") and notes == []


def test_install_py_runs_in_the_pack_with_comfyui_paths_and_torch_pinned(venv, wheels, tmp_path, capsys):  # noqa: F811
    from comfy_bridge.cli import main

    script = (
        "import os, pathlib, sys\n"
        "pins = ''.join(pathlib.Path(p).read_text() for p in os.environ['PIP_CONSTRAINT'].split())\n"
        "pathlib.Path('ran.txt').write_text('\\n'.join([os.getcwd(), os.environ['COMFYUI_PATH'],\n"
        "    os.environ['COMFYUI_MODEL_PATH'], sys.executable, pins]))\n"
    )
    pack = make_pack(tmp_path, "impact_like", script=script)
    ws_dir = tmp_path / "ws"
    assert main(["nodes", "install", str(pack), "--workspace", str(ws_dir), "--pip-arg=--no-index"]) == 0
    installed = ws_dir / "custom_nodes" / "impact_like"
    cwd, comfyui, models, _python, pins = (installed / "ran.txt").read_text().split("\n", 4)
    ws = Workspace(ws_dir)
    assert (Path(cwd), Path(comfyui), Path(models)) == (installed, ws.root, ws.models_dir)
    assert f"torch=={installed_torch_family()['torch']}\n" in pins
    assert f"ran {installed / 'install.py'}" in capsys.readouterr().out


def test_a_failing_install_py_is_a_warning_and_the_pack_stays(tmp_path, capsys):
    from comfy_bridge.cli import main

    pack = make_pack(
        tmp_path,
        "reactor_like",
        script="import sys\nprint('downloading inswapper_128.onnx')\nsys.exit('no network here')\n",
    )
    assert main(["nodes", "install", str(pack), "--workspace", str(tmp_path / "ws")]) == 0
    assert (tmp_path / "ws" / "custom_nodes" / "reactor_like").is_dir()
    err = capsys.readouterr().err
    assert "install.py failed (exit 1): no network here" in err
    skipped = make_pack(tmp_path / "b", "skipped_pack", script="raise SystemExit('must not run')\n")
    assert main(["nodes", "install", str(skipped), "--workspace", str(tmp_path / "ws"), "--skip-install-script"]) == 0
    assert "must not run" not in capsys.readouterr().err


def test_install_py_imports_a_torchvision_built_for_another_torch(tmp_path, monkeypatch):
    """Impact-Pack's install.py imports torchvision.datasets.utils; with PyPI's torchvision beside a CPU torch
    that import fails unless its op schemas are declared first, as the server declares them for pack code."""
    from comfy_bridge.packs.install_steps import run_install_script
    from tests.packs.test_torchvision_ops import REPO, STAND_IN

    site = tmp_path / "site" / "torchvision"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text(STAND_IN)
    (site / "transforms.py").write_text("")
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path / 'site'}:{REPO}")
    pack = make_pack(tmp_path, "impact_like", script="import torchvision\nopen('imported.txt', 'w').close()\n")
    notes: list[str] = []
    assert run_install_script(pack, tmp_path, tmp_path / "models", sys.executable, notes), notes
    assert (pack / "imported.txt").is_file()


def test_install_py_sees_its_own_absolute_path_as_under_python_install_py(tmp_path):
    """`python install.py` (what ComfyUI-Manager runs) gives the script an absolute __file__ and its folder as
    sys.path[0]; ReActor's install.py finds the models folder as Path(__file__).parents[2] / "models" (it failed
    with IndexError under a relative __file__, before its download and its onnxruntime install)."""
    from comfy_bridge.cli import main

    script = (
        "import json, os, sys\n"
        "from pathlib import Path\n"
        "models = os.path.join(Path(__file__).parents[2], 'models')\n"
        "Path('seen.json').write_text(json.dumps([__file__, sys.argv[0], sys.path[0], models]))\n"
    )
    pack = make_pack(tmp_path, "reactor_paths", script=script)
    assert main(["nodes", "install", str(pack), "--workspace", str(tmp_path / "ws")]) == 0
    installed = tmp_path / "ws" / "custom_nodes" / "reactor_paths"
    file, argv0, path0, models = json.loads((installed / "seen.json").read_text())
    assert Path(file) == installed / "install.py" and Path(file).is_absolute()
    assert argv0 == "install.py" and Path(path0) == installed
    assert Path(models) == Workspace(tmp_path / "ws").models_dir
