"""Every module a step of scripts/gpu_check.sh imports is on the GPU machine or brought as a wheel.

The GPU machine reaches no package registry, and GPU time there is short: a step that dies at import wastes
the run. For each step of the check (the test files and scripts its command names, as the dry run prints
them, with the conftests pytest loads for them and the processes they start) this follows our modules'
imports transitively (module level and inside functions, except imports guarded by an ImportError handler
or TYPE_CHECKING) and maps every third-party module to its distribution. Each must be in the machine's
package list (scripts/gpu_machine_packages.txt, from ../shared/reference/gpu-machine.md) or in
scripts/gpu_wheels.txt; and each wheel brought (installed there with --no-deps) must find its own
requirements there or among the wheels.
"""

from __future__ import annotations

import ast
import importlib.metadata as md
import re
import subprocess
import sys
import zipfile
from functools import cache
from pathlib import Path

from packaging.requirements import Requirement

from comfy_bridge.compat import ALIASES  # ComfyUI's module names, resolved to comfy_bridge.compat

REPO = Path(__file__).resolve().parents[1]
OURS = {"cluster", "comfy_bridge", "nodes", "tests", "scripts"}
# what a test file's run starts besides itself: the e2e tests start `serve` and its executors
PROCESSES = {"tests/e2e/test_gpu_executor.py": ["comfy_bridge.cli", "cluster.executor.__main__"]}
# pytest plugins the check's pytest runs use: pyproject's asyncio_mode, and --timeout
PLUGINS = ["pytest_asyncio", "pytest_timeout"]
# imported only on paths no GPU step takes, with why
NOT_REACHED = {
    "ray": "only `serve --ray` imports it (cluster.executor.ray_executors, imported in start_ray_in_background)"
}
# modules of distributions not installed on this machine (packages_distributions cannot name them)
NOT_HERE = {
    "nvshmem": "nvshmem4py-cu13",
    "cuda.core": "cuda-core",
    "cuda.bindings": "cuda-bindings",
    "cuda.pathfinder": "cuda-pathfinder",
}
# nvshmem4py-cu13 0.4.1's Requires-Dist (its wheel's METADATA) for a checkout without .whl/
NVSHMEM4PY_REQUIRES = [
    "nvidia-nvshmem-cu13",
    "cuda-python<14.0,>=13.0",
    "cuda.core>=0.5.0",
    "cuda.pathfinder>=1.2.3",
    "numpy",
    "Cython>=0.29.24",
]
# requirements of brought wheels that nothing imports at run time there
UNUSED_REQUIREMENTS = {
    "cuda-python": "a metapackage over cuda-bindings; nvshmem4py imports cuda.core and cuda.bindings",
    "cython": "nvshmem4py's compiled modules are in its wheel; Cython builds them",
    "importlib-metadata": "diffusers imports the standard library's importlib.metadata on Python >= 3.8",
}
MARKERS = {
    "python_version": "3.12",
    "python_full_version": "3.12.3",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "os_name": "posix",
    "extra": "",
}


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def listed(path: Path) -> set[str]:
    return {
        norm(re.split(r"[=<>\s#]", line.strip(), maxsplit=1)[0])
        for line in path.read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    }


MACHINE = listed(REPO / "scripts" / "gpu_machine_packages.txt")
WHEELS = listed(REPO / "scripts" / "gpu_wheels.txt")


def steps(tmp: Path) -> dict[str, list[str]]:
    """step -> the test files and scripts its command names (from the dry run's exact commands)."""
    for line in (REPO / "scripts" / "gpu_wheels.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.strip().split("==")
            (tmp / f"{re.sub(r'[-_.]+', '_', name.lower())}-{version}-py3-none-any.whl").write_bytes(b"")
    run = subprocess.run(
        ["bash", "scripts/gpu_check.sh", "--dry-run"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "WHEELS": str(tmp), "PY": "python3"},
    )
    assert run.returncode == 0, run.stderr
    out = {}
    for name, command in re.findall(r"^\[([\w-]+), \d+s\] timeout -k \d+ \d+ (.*) >> \S+ 2>&1$", run.stdout, re.M):
        paths = re.findall(r"((?:tests|scripts)/[\w/.-]+\.py)", command.replace("\\", ""))
        out[name] = sorted(set(paths))
    return out


def module_file(module: str) -> Path | None:
    base = REPO.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def module_of(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def guarded(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """Inside `try: ... except ImportError` (or a broader handler), or `if TYPE_CHECKING:`."""
    while node in parents:
        parent = parents[node]
        if isinstance(parent, ast.Try) and node in parent.body:
            for h in parent.handlers:
                names = (
                    []
                    if h.type is None
                    else [ast.unparse(t) for t in (h.type.elts if isinstance(h.type, ast.Tuple) else [h.type])]
                )
                if h.type is None or {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"} & set(names):
                    return True
        if isinstance(parent, ast.If) and "TYPE_CHECKING" in ast.unparse(parent.test) and node in parent.body:
            return True
        node = parent
    return False


@cache
def imports_of(path: Path) -> tuple[str, ...]:
    tree = ast.parse(path.read_text(), str(path))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    here = module_of(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and not guarded(node, parents):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not guarded(node, parents):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            found.append(base)
            found += [f"{base}.{a.name}" for a in node.names if module_file(f"{base}.{a.name}")]
        elif (
            isinstance(node, ast.Call)
            and ast.unparse(node.func) in ("importlib.import_module", "pytest.importorskip")
            and node.args
            and not guarded(node, parents)
        ):
            name = node.args[0]
            if isinstance(name, ast.Constant):
                found.append(name.value)
            elif (
                isinstance(name, ast.JoinedStr)
                and name.values
                and isinstance(name.values[0], ast.Constant)
                and name.values[0].value.endswith(".")
            ):
                found += submodules(name.values[0].value[:-1])  # f"nodes.{name}": any module of the package
    return tuple(m for m in found if m and m != "__future__")


def submodules(package: str) -> list[str]:
    root = module_file(package)
    if root is None or root.name != "__init__.py":
        return []
    return [module_of(p) for p in sorted(root.parent.rglob("*.py"))]


def conftests(test: Path) -> list[Path]:
    return [
        d / "conftest.py"
        for d in [test.parent, *test.parent.parents]
        if (d / "conftest.py").is_file() and REPO in [d, *d.parents]
    ]


def closure(roots: list[str]) -> dict[str, str]:
    """Third-party modules reached from `roots` (our modules or files) -> one path that reaches it."""
    todo: list[tuple[str, str]] = []
    for root in roots:
        if root.endswith(".py"):
            test = REPO / root
            todo += [(module_of(p), module_of(p)) for p in [test, *conftests(test)]]
            todo += [(m, f"{root} starts {m}") for m in PROCESSES.get(root, [])]
        else:
            todo.append((root, root))
    seen: set[str] = set()
    third: dict[str, str] = {}
    while todo:
        module, via = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        top = module.split(".")[0]
        if top in ALIASES:
            module, top = f"comfy_bridge.compat.{module}", "comfy_bridge"
        if top in OURS:
            path = module_file(module)
            if path is not None:
                todo += [(m, f"{via} -> {m}") for m in imports_of(path)]
        elif top not in sys.stdlib_module_names and top not in NOT_REACHED:
            third.setdefault(module, via)
    return third


def distributions(module: str) -> list[str]:
    for prefix, dist in NOT_HERE.items():
        if module == prefix or module.startswith(prefix + "."):
            return [dist]
    top = module.split(".")[0]
    # not installed here either: a distribution named as its module (torchvision is on the GPU machine only)
    return [norm(d) for d in md.packages_distributions().get(top, [])] or ([norm(top)] if norm(top) in MACHINE else [])


def wheel_requirements(dist: str) -> list[str]:
    for whl in sorted((REPO / ".whl").glob(f"{dist.replace('-', '_')}-*.whl")):
        with zipfile.ZipFile(whl) as z:
            meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
            return [
                line.split(":", 1)[1].strip()
                for line in z.read(meta).decode().splitlines()
                if line.startswith("Requires-Dist:")
            ]
    if dist == "nvshmem4py-cu13":
        return NVSHMEM4PY_REQUIRES
    return md.requires(dist) or []


def test_every_module_a_gpu_step_imports_is_on_the_gpu_machine_or_brought(tmp_path):
    found = steps(tmp_path)
    assert {"units", "e2e", "nvshmem-one", "nvshmem-pair", "serve-nvshmem", "env"} <= set(found), found
    missing = []
    for step, roots in found.items():
        for module, via in sorted(closure(roots + (PLUGINS if "tests/" in " ".join(roots) else [])).items()):
            dists = distributions(module)
            if not dists:
                missing.append(f"{step}: {module} (no distribution known for it), via {via}")
            elif not (set(dists) & (MACHINE | WHEELS)):
                missing.append(f"{step}: {module} ({'/'.join(dists)}), via {via}")
    assert not missing, "neither on the GPU machine nor in scripts/gpu_wheels.txt:\n" + "\n".join(sorted(set(missing)))


def test_every_wheel_brought_finds_its_requirements_there():
    """The wheels are installed with --no-deps: what they require must be there already, or brought too."""
    missing = []
    for dist in sorted(WHEELS):
        for text in wheel_requirements(dist):
            req = Requirement(text)
            if req.marker is not None and not req.marker.evaluate(MARKERS):
                continue
            name = norm(req.name)
            if name not in MACHINE | WHEELS and name not in UNUSED_REQUIREMENTS:
                missing.append(f"{dist} requires {text}")
    assert not missing, missing


def test_the_closure_sees_a_module_level_import_deep_in_our_code():
    """The check can fail: blake3, imported at module level by cluster.refs, is reached from the executor,
    and without its wheel it would be reported."""
    reached = closure(["cluster.executor.__main__"])
    assert "blake3" in reached and "cluster.refs" in reached["blake3"]
    assert "blake3" not in MACHINE and "blake3" in WHEELS
