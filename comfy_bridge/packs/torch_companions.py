"""torchvision matched to the installed torch, and spandrel on top of it, as ComfyUI's requirements.txt
installs them: packs import both without listing them (IPAdapter, controlnet_aux, KJNodes, upscalers).

They are not dependencies of comfy-cluster because a torchvision wheel is built for one torch build: on a
CPU torch (`2.13.0+cpu`) the default index's torchvision is a CUDA build whose compiled ops cannot load, and
with it installed even transformers' image processors fail to import. So `nodes install` installs the
torchvision of torch's own build: the same `+cpu` / `+cuXYZ` label, from PyTorch's index for that label,
with torch pinned; a plan for any other torchvision build, or any other change to the torch family, is
refused and nothing is installed.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from packaging.version import Version

from comfy_bridge.packs.pip_guard import (
    RequirementsError,
    TorchReplacement,
    constraints,
    guarded,
    installed_torch_family,
    installed_versions,
    planned_installs,
)

PYTORCH_INDEX = "https://download.pytorch.org/whl/"
COMPANIONS = ("torchvision", "spandrel")
_USES = re.compile(
    r"^\s*(?:import|from)\s+(torchvision|spandrel)\b|^\s*(torchvision|spandrel)\b", re.MULTILINE | re.IGNORECASE
)


def needs_companions(pack: Path) -> bool:
    """Whether a pack (folder or .py file) imports torchvision or spandrel, or names them in its
    requirements.txt (`torchvision` lines start a line there; imports start a line in code)."""
    files = [pack] if pack.is_file() else [*pack.rglob("*.py"), pack / "requirements.txt"]
    for file in files:
        try:
            text = file.read_text(errors="replace")
        except OSError:
            continue
        for match in _USES.finditer(text):
            if match.group(1) or file.name == "requirements.txt":
                return True
    return False


def matched_torchvision(torch_version: str) -> tuple[str, str | None]:
    """(requirement, PyTorch index URL or None for the default index) of the torchvision built for
    `torch_version`: torch 2.N pairs with torchvision 0.(N+15); the local label names the build."""
    version = Version(torch_version)
    if version.major != 2:
        raise RequirementsError(f"no known torchvision release pairs with torch {torch_version}")
    requirement = f"torchvision==0.{version.minor + 15}.*"
    return requirement, (PYTORCH_INDEX + version.local) if version.local else None


def _local(version: str) -> str | None:
    return Version(version).local


def install_torchvision(
    python: str = sys.executable, pip_args: Sequence[str] = (), index_url: str | None = None
) -> list[str]:
    """Install the torchvision of the installed torch's build into `python`'s environment (nothing when
    one is installed). `index_url` overrides PyTorch's index for the build (tests, mirrors); `pip_args`
    go to pip. Raises TorchReplacement, installing nothing, when pip's plan is another build or touches
    anything else of the torch family."""
    family = installed_torch_family(python)
    if "torchvision" in family:
        return []
    torch = family.get("torch")
    if torch is None:
        raise RequirementsError("torch is not installed: install comfy-cluster first")
    requirement, default_index = matched_torchvision(torch)
    index = index_url if index_url is not None else default_index
    args = [*(["--extra-index-url", index] if index else []), *pip_args]
    with tempfile.TemporaryDirectory() as tmp:
        pins, wanted = Path(tmp) / "constraints.txt", Path(tmp) / "requirements.txt"
        pins.write_text(constraints(family))
        wanted.write_text(requirement + "\n")
        plan = planned_installs(python, wanted, pins, args)
        family_plan = [(name, version) for name, version in plan if guarded(name)]
        build_ok = [(n, v) for n, v in family_plan if n.lower() == "torchvision" and _local(v) == _local(torch)]
        if family_plan != build_ok or not build_ok:
            found = ", ".join(f"{n}=={v}" for n, v in family_plan) or "no torchvision"
            raise TorchReplacement(
                f"pip would install {found}, not the torchvision built for torch {torch}"
                + (f" (its index {index} may be out of reach)" if index else "")
                + f"; install it yourself: pip install '{requirement}'"
                + (f" --index-url {index}" if index else "")
            )
        done = subprocess.run(
            [python, "-m", "pip", "install", "-c", str(pins), "-r", str(wanted), *args], capture_output=True, text=True
        )
        if done.returncode != 0:
            raise RequirementsError("pip install torchvision failed:\n" + (done.stderr or done.stdout).strip())
    return [f"{name}=={version}" for name, version in plan]


def install_comfyui_companions(
    python: str = sys.executable, pip_args: Sequence[str] = (), index_url: str | None = None
) -> list[str]:
    """torchvision (matched, as install_torchvision) and then spandrel, each only when missing; returns
    the "name==version" pip installed. spandrel goes through pip_guard's usual check with torchvision pinned."""
    from comfy_bridge.packs.pip_guard import install_requirements

    installed = install_torchvision(python, pip_args, index_url)
    if "spandrel" not in installed_versions(["spandrel"], python):
        with tempfile.TemporaryDirectory() as tmp:
            wanted = Path(tmp) / "requirements.txt"
            wanted.write_text("spandrel\n")
            installed += install_requirements(wanted, python, pip_args)
    return installed
