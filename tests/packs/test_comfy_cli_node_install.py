"""comfy-cli on a Comfy Cluster workspace: `comfy --workspace W node install NAME` (comfy-cli runs
ComfyUI-Manager's cm-cli) puts the pack in W/custom_nodes, where the server loads it on restart.

The real tools run here (comfy-cli and comfyui-manager are test dependencies); only the network is
replaced: NAME resolves through the Manager's bundled node list to its GitHub URL, and git's `insteadOf`
points that URL at a local repository holding a small pack of ours."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from comfy_cli.workspace_manager import check_comfy_repo

from comfy_bridge.compat.workspace_entry_points import ENTRY_POINT_MARK, FILES, is_entry_point, write_entry_points
from nodes.workspace import Workspace
from tests.packs.test_nodes_manage import git, make_pack, registered

# A pack in ComfyUI-Manager's bundled custom-node-list.json, and the URL the list gives for it.
LISTED_NAME = "sd-dynamic-thresholding"
LISTED_URL_PATH = "mcmonkeyprojects/sd-dynamic-thresholding"


def comfy_workspace(tmp_path: Path) -> Workspace:
    ws = Workspace(tmp_path / "ws").create()
    write_entry_points(ws.root)
    return ws


def test_a_workspace_passes_comfy_clis_comfyui_check(tmp_path):
    ws = Workspace(tmp_path / "ws").create()
    assert check_comfy_repo(str(ws.root)) == (False, None)
    write_entry_points(ws.root)
    assert check_comfy_repo(str(ws.root)) == (True, str(ws.root))


def test_entry_points_never_overwrite_a_users_file_and_are_kept_current(tmp_path):
    root = tmp_path / "ws"
    (root / "utils").mkdir(parents=True)
    (root / "utils" / "extra_config.py").write_text("MINE = 1\n")
    (root / "main.py").write_text(f'"""old ({ENTRY_POINT_MARK})"""\n')
    write_entry_points(root)
    assert (root / "utils" / "extra_config.py").read_text() == "MINE = 1\n"
    assert "run_main" in (root / "main.py").read_text()
    assert all((root / name).is_file() for name in FILES if not name.startswith("utils/"))
    assert not (root / "utils" / "__init__.py").exists()  # the folder is the user's


def test_a_real_comfyui_folder_used_as_workspace_keeps_its_own_packages(tmp_path):
    root = tmp_path / "ComfyUI"
    (root / "comfy").mkdir(parents=True)  # ComfyUI's comfy/ has no __init__.py
    (root / "comfy" / "sd.py").write_text("")
    (root / "utils").mkdir()
    (root / "utils" / "__init__.py").write_text("")
    (root / "main.py").write_text("print('ComfyUI')\n")
    write_entry_points(root)
    assert sorted(p.name for p in (root / "comfy").iterdir()) == ["sd.py"]
    assert sorted(p.name for p in (root / "utils").iterdir()) == ["__init__.py"]
    assert (root / "main.py").read_text() == "print('ComfyUI')\n"
    assert is_entry_point(root / "folder_paths.py")


def test_not_written_into_the_project_checkout():
    checkout = Path(__file__).resolve().parents[2]
    write_entry_points(checkout)
    assert not (checkout / "folder_paths.py").exists()


def test_tools_outside_the_server_import_comfyuis_modules_bound_to_the_workspace(tmp_path, monkeypatch):
    """What cm-cli does: append the workspace to sys.path, then import folder_paths and utils.extra_config."""
    ws = comfy_workspace(tmp_path)
    monkeypatch.delenv("PIP_CONSTRAINT", raising=False)
    script = textwrap.dedent(f"""
        import sys
        sys.path.append({str(ws.root)!r})
        import folder_paths, utils.extra_config, comfy.samplers
        print(folder_paths.get_folder_paths("custom_nodes")[0])
        print(folder_paths.get_system_user_directory("manager"))
        print(comfy.samplers.__name__, callable(utils.extra_config.load_extra_path_config))
        import os  # the pip runs the tool starts (a pack's requirements) get the server's torch pins
        print(any("torch==" in open(p).read() for p in os.environ["PIP_CONSTRAINT"].split()))
    """)
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout.split("\n")
    assert out[:4] == [
        str(ws.root / "custom_nodes"),
        str(ws.root / "user" / "__manager"),
        "comfy_bridge.compat.comfy.samplers True",
        "True",
    ]


def test_comfy_node_install_name_puts_the_pack_where_the_server_loads_it(tmp_path):
    ws = comfy_workspace(tmp_path)
    source = make_pack(tmp_path / "src" / "pack", "ListedPackNode")
    git("init", "-q", cwd=source)
    git("add", "-A", cwd=source)
    git("commit", "-qm", "pack", cwd=source)
    served = tmp_path / "github" / LISTED_URL_PATH
    git("clone", "-q", "--bare", str(source), str(served))
    env = {
        **os.environ,
        "HOME": str(tmp_path / "home"),
        "XDG_CONFIG_HOME": str(tmp_path / "home" / ".config"),
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": f"url.{tmp_path / 'github'}/.insteadOf",
        "GIT_CONFIG_VALUE_0": "https://github.com/",
    }
    env.pop("VIRTUAL_ENV", None)  # cm-cli then runs in this interpreter, beside comfy-cluster
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "comfy_cli",
            "--skip-prompt",
            "--workspace",
            str(ws.root),
            "node",
            "install",
            LISTED_NAME,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    installed = ws.root / "custom_nodes" / LISTED_NAME
    assert (installed / "__init__.py").is_file(), result.stdout + result.stderr
    assert "ListedPackNode" in registered(ws)
