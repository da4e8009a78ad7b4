"""The packs-today harness (scripts/packs_today.py): docs/packs.md's table, figures and pack lists are the
committed result file's, the result covers exactly the packs the list file chooses and leaves out, each
importing pack has a recorded case that ran one of its own nodes, and the probe itself imports a pack,
counts its nodes and runs one of them."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("packs_today", REPO / "scripts" / "packs_today.py")
packs_today = importlib.util.module_from_spec(spec)
spec.loader.exec_module(packs_today)


def result() -> dict:
    return json.loads(packs_today.RESULT.read_text())


def docs_block() -> str:
    text = packs_today.DOCS.read_text()
    start, end = text.index(packs_today.TABLE_START), text.index(packs_today.TABLE_END)
    return text[start + len(packs_today.TABLE_START) : end].strip("\n") + "\n"


def test_the_docs_block_is_the_result_files():
    assert docs_block() == packs_today.docs_block(result())


def test_the_result_covers_the_chosen_packs_and_names_those_left_out():
    packs, left_out = packs_today.read_list()
    data = result()
    assert [(p["repo"], p["commit"]) for p in data["packs"]] == [(p["repo"], p["commit"]) for p in packs]
    assert data["left_out"] == left_out
    assert len(packs) == 60 and len({p["repo"] for p in packs}) == 60
    assert data["summary"] == packs_today.summary(data["packs"])
    block = docs_block()
    for item in left_out:
        assert item["repo"] in block and item["why"] in block


def test_each_case_ran_a_node_of_its_pack():
    data = result()
    for pack in data["packs"]:
        cases = [c for c in pack.get("cases", []) if c["ok"]]
        for case in cases:  # the node run is one the pack declares, and its outputs were recorded
            assert case["prompt"]["node"]["class_type"] == case["node"]
            assert "outputs" in case
        # a pack that imported with nodes tried its candidates in order until one ran, none after it
        oks = [a["ok"] for a in pack.get("attempts", [])]
        assert oks == [False] * (len(oks) - 1) + [True] if cases else not any(oks), pack["folder"]


def test_build_case_fills_widgets_and_feeds_images():
    info = {
        "input": {
            "required": {
                "image": ("IMAGE",),
                "n": ("INT", {"default": 3, "min": 1}),
                "mode": (["a", "b"],),
                "v3": ("COMBO", {"options": ["x"]}),
                "text": ("STRING", {"multiline": True}),
                "flag": ("BOOLEAN", {}),
            },
            "optional": {"model": ("MODEL",)},
        }
    }
    prompt = packs_today.build_case("Node", info)
    assert prompt["node"]["inputs"] == {
        "image": ["feed_image", 0],
        "n": 3,
        "mode": "a",
        "v3": "x",
        "text": "a photo of a cat",
        "flag": False,
    }
    assert prompt["feed_image"]["class_type"] == "EmptyImage"
    assert packs_today.build_case("Needs", {"input": {"required": {"face": ("FACEANALYSIS",)}}}) is None
    assert packs_today.build_case("Empty", {"input": {"required": {"choice": ([],)}}}) is None


def test_models_and_conditioning_come_from_the_demo_checkpoint():
    prompt = packs_today.build_case(
        "Apply", {"input": {"required": {"model": ("MODEL",), "cond": ("CONDITIONING",), "vae": ("VAE",)}}}
    )
    assert prompt["node"]["inputs"] == {"model": ["feed_ckpt", 0], "cond": ["feed_cond", 0], "vae": ["feed_ckpt", 2]}
    # the checkpoint ComfyUI detects too (tests/models/test_detectable_sd1.py), so the case runs on both sides
    assert prompt["feed_ckpt"]["inputs"] == {"ckpt_name": "sd1-detectable.safetensors"}
    assert prompt["feed_cond"]["inputs"]["clip"] == ["feed_ckpt", 1]


def test_v3_type_names_are_filled_like_plain_ones():
    """V3 schemas list their types as str subclasses (matching "*" in validation); they are not any-type names."""
    from comfy_bridge.compat.comfy_api.latest._io import _StringIOType

    info = {"input": {"required": {"image": (_StringIOType("IMAGE"), {}), "n": (_StringIOType("INT"), {"default": 2})}}}
    assert packs_today.build_case("V3", info)["node"]["inputs"] == {"image": ["feed_image", 0], "n": 2}


class AnyType(str):
    """The "any type" name packs declare: equal to every type, and (as Easy-Use's) unhashable."""

    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = None


def test_an_any_type_input_is_not_filled():
    assert packs_today.build_case("Show", {"input": {"required": {"anything": (AnyType("*"), {})}}}) is None


def test_the_probe_imports_a_pack_and_runs_one_of_its_nodes(tmp_path):
    pack = tmp_path / "ws" / "custom_nodes" / "tiny_pack"
    pack.mkdir(parents=True)
    (pack / "__init__.py").write_text(
        textwrap.dedent("""
        class LoadThing:
            @classmethod
            def INPUT_TYPES(cls):
                return {"required": {"name": ("STRING", {"default": "x"})}}
            RETURN_TYPES = ("STRING",)
            FUNCTION = "run"
            def run(self, name):
                raise FileNotFoundError("no model " + name)
        class Brighter:
            @classmethod
            def INPUT_TYPES(cls):
                return {"required": {"image": ("IMAGE",), "amount": ("FLOAT", {"default": 0.25})}}
            RETURN_TYPES = ("IMAGE",)
            FUNCTION = "run"
            def run(self, image, amount):
                return (image + amount,)
        class Broken:
            @classmethod
            def INPUT_TYPES(cls):
                raise RuntimeError("cannot describe")
        NODE_CLASS_MAPPINGS = {"LoadThing": LoadThing, "Brighter": Brighter, "Broken": Broken,
                               "EmptyImage": Brighter}
    """)
    )
    out = tmp_path / "probe.json"
    subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "packs_today.py"),
            "probe",
            "--workspace",
            str(tmp_path / "ws"),
            "--pack",
            "tiny_pack",
            "--out",
            str(out),
        ],
        check=True,
        timeout=600,
        cwd=tmp_path,
    )
    got = json.loads(out.read_text())
    # EmptyImage is a core name (not the pack's to replace, as in ComfyUI); Broken is declared but unlisted.
    assert got["core_names"] == ["EmptyImage"]
    assert (got["nodes_declared"], got["nodes_listed"], got["nodes_missing"]) == (3, 2, ["Broken"])
    assert got["imported"] is False and got["finished"] is True
    assert [a["node"] for a in got["attempts"]] == ["Brighter"]  # loaders are tried last
    case = got["cases"][0]
    assert case["node"] == "Brighter" and case["outputs"][0][0]["tensor"] == [1, 64, 64, 3]


def git(*args: str, cwd: Path, date: str | None = None) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    if date:
        env |= {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def mirror(mirrors: Path, repo: str, commits: list[tuple[str, str]], work: Path) -> None:
    """A bare mirror of GitHub repo `repo`, default branch Main, one commit per (date, file name)."""
    tree = work / repo.replace("/", "+")
    tree.mkdir(parents=True)
    git("init", "-q", "-b", "Main", cwd=tree)
    for date, name in commits:
        (tree / name).write_text(name)
        git("add", name, cwd=tree)
        git("commit", "-q", "-m", name, cwd=tree, date=date)
    git("clone", "-q", "--bare", str(tree), str(mirrors / repo.replace("/", "+") / "repo"), cwd=work)


def test_clones_by_install_py_come_as_they_were_on_the_pack_commits_date(tmp_path):
    """Impact-Pack's October 2024 commit clones its subpack: it gets the subpack of that date, not the newest."""
    mirrors = tmp_path / "mirrors"
    subpack = [("2024-09-25T10:00:00+09:00", "subpack_nodes.py"), ("2025-01-26T10:00:00+09:00", "new_layout.py")]
    mirror(mirrors, "ltdrdata/ComfyUI-Impact-Subpack", subpack, tmp_path / "trees")
    mirror(mirrors, "someone/later-pack", [("2025-03-01T00:00:00+00:00", "later.py")], tmp_path / "trees")
    views = packs_today.dated_mirrors(mirrors, "2024-10-24T00:25:57+09:00", tmp_path / "views")
    env = {**packs_today.os.environ, **packs_today.github_via_mirrors(views)}
    dest = tmp_path / "clone"
    url = "https://github.com/ltdrdata/ComfyUI-Impact-Subpack"
    subprocess.run(["git", "clone", "-q", url, str(dest)], env=env, check=True, capture_output=True)
    assert sorted(p.name for p in dest.iterdir() if p.name != ".git") == ["subpack_nodes.py"]
    # a repository made after that date did not exist then: its clone fails as it would have
    gone = subprocess.run(
        ["git", "clone", "-q", "https://github.com/someone/later-pack", str(tmp_path / "later")],
        env=env | {"GIT_TERMINAL_PROMPT": "0"},
        capture_output=True,
        check=False,
    )
    assert gone.returncode != 0 and not (tmp_path / "later" / "later.py").exists()
    # the mirror itself is untouched: its Main still is the newest commit
    newest = git(
        "--git-dir", str(mirrors / "ltdrdata+ComfyUI-Impact-Subpack" / "repo"), "log", "-1", "--format=%s", cwd=tmp_path
    )
    assert newest == "new_layout.py"


def test_stand_ins_are_marked_and_install_py_finds_them_in_the_workspace(tmp_path, capsys):
    """ReActor's install.py goes on to its pip installs only when inswapper_128.onnx is in models/insightface:
    the stand-in is there before `nodes install`, which keeps it and installs into that workspace."""
    from comfy_bridge.cli import main

    ws = tmp_path / "ws"
    placed = packs_today.place_stand_ins("Gourieff/ComfyUI-ReActor", ws)
    assert placed[0] == "insightface/inswapper_128.onnx" and len(placed) == 5
    text = (ws / "models" / placed[0]).read_text()
    assert text.startswith(packs_today.STAND_IN_MARK) and "Gourieff/ReActor" in text
    pack = tmp_path / "reactor_like"
    pack.mkdir()
    (pack / "__init__.py").write_text("NODE_CLASS_MAPPINGS = {}\n")
    (pack / "install.py").write_text(
        "import os, sys\n"
        "model = os.path.join(os.environ['COMFYUI_MODEL_PATH'], 'insightface', 'inswapper_128.onnx')\n"
        "if not os.path.exists(model):\n"
        "    sys.exit('urlopen error: no network here')\n"
        "open('went_on.txt', 'w').write('pip install onnxruntime would run now')\n"
    )
    assert main(["nodes", "install", str(pack), "--workspace", str(ws)]) == 0
    assert (ws / "custom_nodes" / "reactor_like" / "went_on.txt").is_file()
    assert "no network here" not in capsys.readouterr().err
    assert (ws / "models" / placed[0]).read_text() == text
    assert packs_today.place_stand_ins("someone/other-pack", ws) == []


def test_requirements_by_hand_go_through_the_torch_guard(tmp_path):
    """The subpack requirements the harness installs by hand for Impact-Pack are installed as `nodes install`
    installs a requirements.txt: one that would replace torch is refused."""
    pack = tmp_path / "ComfyUI-Impact-Pack"
    (pack / "impact_subpack").mkdir(parents=True)
    (pack / "impact_subpack" / "requirements.txt").write_text("torch==1.0.0\n")
    env = {**packs_today.os.environ, "PYTHONPATH": str(REPO)}
    done = packs_today.install_by_hand("ltdrdata/ComfyUI-Impact-Pack", sys.executable, pack, env)
    assert done is not None and done["ok"] is False and done["requirements"] == "impact_subpack/requirements.txt"
    assert "TorchReplacement" in done["output"] and "ultralytics" in done["why"]
    assert packs_today.install_by_hand("someone/other-pack", sys.executable, pack, env) is None
