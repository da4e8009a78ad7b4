"""Installing a node pack's requirements.txt without letting it replace torch.

The environment's torch build (CPU, or a CUDA build matched to the machine) is what every model runs on;
a pack that pins another torch, or asks for torchvision / torchaudio (whose wheels pin their own torch
build), would swap it out. So: the torch family's installed versions become pip constraints, a
requirement that names a family member it cannot keep is refused before pip runs, and pip's own
resolution (`--dry-run --report`) is read for anything of the family it would still install.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable, MutableMapping, Sequence
from pathlib import Path

import psutil
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

# The packages that are one torch build together; pip must never install or change these for a pack.
TORCH_FAMILY = frozenset({"torch", "torchvision", "torchaudio", "triton", "pytorch-triton"})
# CUDA runtime wheels come only with a torch build: planning one means torch would change.
GUARDED_PREFIXES = ("nvidia-",)
# ...except NVIDIA's pure-Python NVML bindings, which packs list to read GPU stats (Crystools, ReActor) and which
# work beside any torch build.
NOT_GUARDED = frozenset({"nvidia-ml-py", "nvidia-ml-py3"})


# pip names the constraints a resolution conflict involves: "The user requested (constraint) torch==2.13.0".
_CONSTRAINT_IN_CONFLICT = re.compile(r"\(constraint\)\s+([A-Za-z0-9][A-Za-z0-9._-]*)")


class RequirementsError(RuntimeError):
    """pip could not install a pack's requirements."""


class TorchReplacement(RequirementsError):
    """Installing the requirements would replace or add to the environment's torch build."""


def guarded(name: str) -> bool:
    name = canonicalize_name(name)
    return name in TORCH_FAMILY or (name.startswith(GUARDED_PREFIXES) and name not in NOT_GUARDED)


def installed_versions(names: Iterable[str], python: str = sys.executable) -> dict[str, str]:
    """{name: version} of those of `names` installed in `python`'s environment: read here for this
    interpreter, asked of any other one."""
    names = sorted(names)
    if python == sys.executable:
        from importlib import metadata

        found = {}
        for name in names:
            try:
                found[name] = metadata.version(name)
            except metadata.PackageNotFoundError:
                pass
        return found
    probe = (
        f"import json, importlib.metadata as m\nout = {{}}\nfor n in {names!r}:\n    try: out[n] = m.version(n)\n"
        "    except m.PackageNotFoundError: pass\nprint(json.dumps(out))"
    )
    done = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def installed_torch_family(python: str = sys.executable) -> dict[str, str]:
    """{name: version} of the torch family installed in `python`'s environment."""
    return installed_versions(TORCH_FAMILY, python)


def constraints(installed: dict[str, str]) -> str:
    """pip constraints that keep the installed torch family exactly as it is."""
    return "".join(f"{name}=={version}\n" for name, version in sorted(installed.items()))


def check_requirement_lines(lines: Sequence[str], installed: dict[str, str]) -> None:
    """Refuse requirements that name a torch-family package the environment cannot keep: a version
    other than the installed one, or a member that is not installed. Lines that are not plain
    requirements (options, URLs, editables) are left to pip's dry run."""
    for raw in lines:
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith(("#", "-")):
            continue
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        name = canonicalize_name(req.name)
        if not guarded(name):
            continue
        have = installed.get(name)
        if have is None:
            raise TorchReplacement(
                f"requirement {line!r} would install {name}, whose wheels pin their own torch "
                f"build and would replace the environment's torch {installed.get('torch', '?')}"
            )
        if req.url or not req.specifier.contains(have, prereleases=True):
            raise TorchReplacement(
                f"requirement {line!r} conflicts with the installed {name} {have}, which Comfy Cluster keeps"
            )


def planned_installs(
    python: str, requirements: Path, constraints_file: Path, pip_args: Sequence[str] = ()
) -> list[tuple[str, str]]:
    """[(name, version)] pip would install for `requirements` under the constraints (nothing installed)."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        done = subprocess.run(
            [
                python,
                "-m",
                "pip",
                "install",
                "--dry-run",
                "--report",
                str(report),
                "-c",
                str(constraints_file),
                "-r",
                str(requirements),
                *pip_args,
            ],
            capture_output=True,
            text=True,
            cwd=requirements.parent,
        )
        if done.returncode != 0:
            # The conflict's causes are on stdout, the error on stderr.
            message = (done.stdout + done.stderr).strip()
            if any(guarded(name) for name in _CONSTRAINT_IN_CONFLICT.findall(message)):
                raise TorchReplacement(
                    "pip cannot install the requirements with the environment's torch kept:\n" + message
                )
            raise RequirementsError("pip cannot resolve the requirements:\n" + message)
        data = json.loads(report.read_text())
    return [(item["metadata"]["name"], item["metadata"]["version"]) for item in data.get("install", [])]


def install_requirements(requirements: Path, python: str = sys.executable, pip_args: Sequence[str] = ()) -> list[str]:
    """Install a requirements.txt into `python`'s environment with the torch family pinned; returns
    the "name==version" pip installed. Raises TorchReplacement (and installs nothing) when the
    requirements would replace torch, RequirementsError when pip fails."""
    installed = installed_torch_family(python)
    check_requirement_lines(requirements.read_text().splitlines(), installed)
    with tempfile.TemporaryDirectory() as tmp:
        pins = Path(tmp) / "constraints.txt"
        pins.write_text(constraints(installed_torch_family()))
        plan = planned_installs(python, requirements, pins, pip_args)
        touched = [f"{name}=={version}" for name, version in plan if guarded(name)]
        if touched:
            raise TorchReplacement(
                "installing the requirements would install "
                + ", ".join(touched)
                + f", replacing the environment's torch {installed.get('torch', '?')}"
            )
        if not plan:
            return []
        done = subprocess.run(
            [python, "-m", "pip", "install", "-c", str(pins), "-r", str(requirements), *pip_args],
            capture_output=True,
            text=True,
            cwd=requirements.parent,
        )
        if done.returncode != 0:
            raise RequirementsError("pip install failed:\n" + (done.stderr or done.stdout).strip())
    return [f"{name}=={version}" for name, version in plan]


PINS_PREFIX = "comfy-cluster-torch-pins-"


def guard_pack_installs_at_runtime(environ: MutableMapping[str, str] = os.environ) -> Path:
    """Pin the torch family for the pip runs packs start themselves while they load (ComfyUI-Manager's
    startup script, packs that install a missing module on import): pip reads PIP_CONSTRAINT, and the
    child processes packs spawn inherit it. Constraints already set there are kept. Returns the file,
    which lives as long as this process: removed at its exit, and (for a process that was killed) by
    the next process that makes one."""
    folder = Path(tempfile.gettempdir())
    _remove_dead_pins(folder)
    pins = folder / f"{PINS_PREFIX}{os.getpid()}.txt"
    pins.write_text(constraints(installed_torch_family()))
    if pins not in _owned_pins:
        _owned_pins.add(pins)
        atexit.register(_remove_pins, pins, os.getpid())
    existing = [p for p in environ.get("PIP_CONSTRAINT", "").split() if p and p != str(pins)]
    environ["PIP_CONSTRAINT"] = " ".join([*existing, str(pins)])
    return pins


_owned_pins: set[Path] = set()  # the pin files this process registered for removal at its exit


def _remove_pins(pins: Path, owner: int) -> None:
    if os.getpid() == owner:  # not in a forked child that inherited the handler: the file is its parent's
        pins.unlink(missing_ok=True)


def _remove_dead_pins(folder: Path) -> None:
    """Pin files of processes that no longer run (killed before their exit handler ran)."""
    for path in folder.glob(f"{PINS_PREFIX}*.txt"):
        pid = path.name[len(PINS_PREFIX) : -len(".txt")]
        if pid.isdigit() and not psutil.pid_exists(int(pid)):
            try:
                path.unlink(missing_ok=True)
            except OSError:  # another user's, in a shared /tmp
                pass
