"""Files a pack node's result names are read on the machine it ran on and written at the same place in the
head's folders; names that would leave the output, temp or input folders are neither read nor written."""

from __future__ import annotations

import pytest

from comfy_bridge.packs.node_files import named_files, read_named, write_named
from nodes.safe_paths import UnsafePath
from nodes.workspace import Workspace


def test_named_files_go_to_the_same_place_on_the_head(tmp_path):
    there, here = Workspace(tmp_path / "there").create(), Workspace(tmp_path / "here").create()
    (there.output_dir / "sub").mkdir()
    (there.output_dir / "sub" / "a.png").write_bytes(b"png bytes")
    (there.temp_dir / "p.png").write_bytes(b"preview")
    result = {
        "ui": {
            "images": [
                {"filename": "a.png", "subfolder": "sub", "type": "output"},
                {"filename": "p.png", "subfolder": "", "type": "temp"},
                {"filename": "gone.png", "subfolder": "", "type": "output"},
            ],
            "text": ["not a file"],
        }
    }
    files = read_named(result, there)
    assert files == {("output", "sub", "a.png"): b"png bytes", ("temp", "", "p.png"): b"preview"}
    write_named(files, here)
    assert (here.output_dir / "sub" / "a.png").read_bytes() == b"png bytes"
    assert (here.temp_dir / "p.png").read_bytes() == b"preview"


def test_names_that_leave_the_folders_are_neither_read_nor_written(tmp_path):
    there, here = Workspace(tmp_path / "there").create(), Workspace(tmp_path / "here").create()
    (tmp_path / "secret.txt").write_text("not for the head")
    result = {
        "ui": {
            "images": [
                {"filename": "secret.txt", "subfolder": "../..", "type": "output"},
                {"filename": "x", "subfolder": "", "type": "models"},
            ]
        }
    }
    assert len(named_files(result)) == 2 and read_named(result, there) == {}
    with pytest.raises(UnsafePath):
        write_named({("output", "../..", "evil.txt"): b"x"}, here)
    assert not (tmp_path / "evil.txt").exists()
