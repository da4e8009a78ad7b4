"""Output-name claims in the durable store and atomic writes (nodes.output_claims)."""

from __future__ import annotations

import pytest
import torch

from comfy_bridge.execution.node_context import CurrentNodeContext, executing_node_key
from comfy_bridge.tenancy.store import Store
from nodes import output_claims
from nodes.output_claims import Claim, write_atomic
from nodes.workspace import Workspace, activate


def test_a_claim_is_kept_for_its_prompt_and_skipped_by_others(tmp_path):
    store = Store(tmp_path / "db.sqlite3", scrypt_n=2**10)
    a = store.queue_add("", "pa", 1, ["x"])
    b = store.queue_add("", "pb", 2, ["y"])
    assert store.claim_output(a, "5/None/0", "/out", "img", 1, 2) == Claim("/out", "img", 1)
    # the re-run finds its claim although the disk now says counter 3
    assert store.claim_output(a, "5/None/0", "/out", "img", 3, 2) == Claim("/out", "img", 1)
    # another prompt does not take counters 1 and 2 before they are written
    assert store.claim_output(b, "5/None/0", "/out", "img", 1, 1) == Claim("/out", "img", 3)
    store.queue_claim(a)
    store.finish(a, "pa", "", {}, 10)
    assert store.claim_output(a, "5/None/0", "/out", "img", 7, 1) == Claim("/out", "img", 7)  # gone with its row
    store.close()


def test_save_image_rerun_writes_over_the_dead_runs_file(tmp_path):
    from nodes.image_io import SaveImage

    ws = activate(Workspace(tmp_path / "ws").create())
    store = Store(tmp_path / "db.sqlite3", scrypt_n=2**10)
    task = store.queue_add("", "p", 1, ["x"])
    names = []
    for value in (0.25, 0.75):  # the dead run, then the re-run
        token = output_claims.bind(store, task, executing_node_key)
        try:
            with CurrentNodeContext("p", "9"):
                names.append(SaveImage().save_images(torch.full((1, 4, 4, 3), value), "out")["ui"]["images"])
        finally:
            output_claims.unbind(token)
    assert names[0] == names[1] == [{"filename": "out_00001_.png", "subfolder": "", "type": "output"}]
    assert sorted(p.name for p in ws.output_dir.iterdir()) == ["out_00001_.png"]
    store.close()


def test_a_failed_write_leaves_neither_the_file_nor_its_temporary(tmp_path):
    def half(tmp: str) -> None:
        with open(tmp, "wb") as f:
            f.write(b"half")
        raise OSError("disk full")

    with pytest.raises(OSError):
        write_atomic(tmp_path / "a.png", half)
    assert list(tmp_path.iterdir()) == []
