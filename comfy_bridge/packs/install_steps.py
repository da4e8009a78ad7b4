"""The steps of `nodes install` that ComfyUI-Manager takes beyond one `pip install -r requirements.txt`:

- requirements line by line when the file as a whole cannot be installed (the Manager installs each line on
  its own, so one unreachable line, such as a `git+https://` URL offline, does not keep the others out);
- modules a pack imports without listing them that a ComfyUI install has in practice (UNLISTED);
- the pack's `install.py`, run as the Manager runs it (the pack's folder as working directory, COMFYUI_PATH and
  COMFYUI_MODEL_PATH set), with the torch family pinned for the pip runs it starts (PIP_CONSTRAINT).

Each returns what it installed and appends to `notes` what it could not do; none of them fails the install,
as none fails it in the Manager."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from comfy_bridge.packs.pip_guard import (
    RequirementsError,
    TorchReplacement,
    constraints,
    install_requirements,
    installed_torch_family,
)

INSTALL_SCRIPT = "install.py"
INSTALL_SCRIPT_TIMEOUT_S = 1800
# Import name -> the package a pack that imports it without listing it gets. OpenCV is not in ComfyUI's own
# requirements, but every popular ComfyUI setup has it (Impact, controlnet_aux, ReActor, WAS, LayerStyle... list
# it), so packs such as ComfyUI-Allor import cv2 without naming it. The headless build: no GUI libraries needed.
UNLISTED = {"cv2": "opencv-python-headless"}
# install.py runs as `python install.py` would, after what the server does before pack code runs: a torchvision
# built for another torch imports (Impact-Pack's install.py imports torchvision.datasets.utils). As under
# `python install.py`, its __file__ is absolute and its folder is sys.path[0] (ReActor's install.py finds the
# models folder from Path(__file__).parents[2]).
# (runpy.run_path would set sys.argv[0] to the absolute path too, where the script reads "install.py".)
_RUN_SCRIPT = f"""import os, sys, types
from comfy_bridge.packs.torchvision_ops import make_torchvision_importable
make_torchvision_importable()
script = os.path.abspath({INSTALL_SCRIPT!r})
sys.argv = [{INSTALL_SCRIPT!r}]
sys.path[0] = os.path.dirname(script)
main = sys.modules["__main__"] = types.ModuleType("__main__")
main.__file__ = script
with open(script, "rb") as f:
    code = compile(f.read(), script, "exec")
exec(code, main.__dict__)
"""


def _tail(text: str, lines: int = 3) -> str:
    kept = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " / ".join(kept[-lines:])


def install_line_by_line(requirements: Path, python: str, pip_args: Sequence[str], notes: list[str]) -> list[str]:
    """Each requirement line on its own, under the torch guard (option lines go with every one); returns
    what pip installed, and appends to `notes` each line that could not be installed and why."""
    lines = [raw.split(" #", 1)[0].strip() for raw in requirements.read_text().splitlines()]
    lines = [line for line in lines if line and not line.startswith("#")]
    options = [line for line in lines if line.startswith("-")]
    installed: list[str] = []
    for line in (line for line in lines if not line.startswith("-")):
        with tempfile.TemporaryDirectory() as tmp:
            one = Path(tmp) / "requirements.txt"
            one.write_text("".join(f"{o}\n" for o in options) + line + "\n")
            try:
                installed += install_requirements(one, python, pip_args)
            except TorchReplacement as err:
                notes.append(f"requirement {line!r} was not installed: it would replace torch ({_tail(str(err), 1)})")
            except RequirementsError as err:
                notes.append(f"requirement {line!r} could not be installed: {_tail(str(err))}")
    return installed


def _imports(pack: Path, module: str) -> bool:
    pattern = re.compile(rf"^\s*(?:import|from)\s+{re.escape(module)}\b", re.MULTILINE)
    files = [pack] if pack.is_file() else pack.rglob("*.py")
    return any(pattern.search(f.read_text(errors="replace")) for f in files if f.is_file())


def _importable(python: str, module: str) -> bool:
    probe = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    return subprocess.run([python, "-c", probe], capture_output=True, check=False).returncode == 0


def install_unlisted(pack: Path, python: str, pip_args: Sequence[str], notes: list[str]) -> list[str]:
    """The UNLISTED packages of modules the pack imports that its requirements did not bring."""
    installed: list[str] = []
    for module, package in UNLISTED.items():
        if not _imports(pack, module) or _importable(python, module):
            continue
        with tempfile.TemporaryDirectory() as tmp:
            wanted = Path(tmp) / "requirements.txt"
            wanted.write_text(package + "\n")
            try:
                installed += install_requirements(wanted, python, pip_args)
            except RequirementsError as err:
                notes.append(
                    f"the pack imports {module} without listing it, and {package} could not be "
                    f"installed: {_tail(str(err))}"
                )
    return installed


def run_install_script(pack: Path, comfyui_path: Path, models_dir: Path, python: str, notes: list[str]) -> bool | None:
    """Run the pack's install.py as ComfyUI-Manager does; None when it has none, else whether it succeeded (its
    failure is a note). Its pip runs get the torch family as constraints."""
    script = pack / INSTALL_SCRIPT
    if not (pack.is_dir() and script.is_file()):
        return None
    with tempfile.TemporaryDirectory() as tmp:
        pins = Path(tmp) / "torch-pins.txt"
        pins.write_text(constraints(installed_torch_family(python)))
        kept = [p for p in os.environ.get("PIP_CONSTRAINT", "").split() if p]
        env = {
            **os.environ,
            "COMFYUI_PATH": str(comfyui_path),
            "COMFYUI_MODEL_PATH": str(models_dir),
            "PIP_CONSTRAINT": " ".join([*kept, str(pins)]),
        }
        try:
            done = subprocess.run(
                [python, "-c", _RUN_SCRIPT],
                cwd=pack,
                env=env,
                capture_output=True,
                text=True,
                timeout=INSTALL_SCRIPT_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            notes.append(f"{script} did not finish in {INSTALL_SCRIPT_TIMEOUT_S} s")
            return False
    if done.returncode != 0:
        notes.append(f"{script} failed (exit {done.returncode}): {_tail(done.stderr or done.stdout)}")
        return False
    return True
