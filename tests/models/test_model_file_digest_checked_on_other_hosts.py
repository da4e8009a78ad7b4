"""An executor that joined over TCP reads model files from its own machine: a copy whose content differs
from the file the head digested is refused with an error naming both digests, not silently run."""

from __future__ import annotations

import os

import pytest
import torch
from safetensors.torch import save_file

from cluster import refs
from nodes.models.errors import ModelLoadError
from nodes.models.safetensors_io import CACHE, load_state_dict


@pytest.fixture
def verifying():
    refs.verify_digests(True)
    CACHE.clear()
    yield
    refs.verify_digests(False)
    CACHE.clear()


def test_a_changed_copy_is_refused_when_digests_are_verified(tmp_path, verifying):
    path = tmp_path / "model.safetensors"
    save_file({"w": torch.zeros(4)}, str(path))
    heads_digest = refs.file_digest(path)
    assert load_state_dict(path, heads_digest)["w"].sum() == 0  # the same content loads
    CACHE.clear()
    save_file({"w": torch.ones(4)}, str(path))  # this machine's copy is another file
    os.utime(path, ns=(1, 1))  # digests are memoised by (path, size, mtime): a copy made in the same tick
    with pytest.raises(ModelLoadError, match="differs from the head's") as err:
        load_state_dict(path, heads_digest)
    assert heads_digest[:16] in str(err.value) and refs.file_digest(path)[:16] in str(err.value)


def test_without_verification_the_heads_digest_keys_the_cache(tmp_path):
    path = tmp_path / "model.safetensors"
    save_file({"w": torch.zeros(4)}, str(path))
    CACHE.clear()
    assert load_state_dict(path, "not-this-files-digest")["w"].sum() == 0  # same-host executors trust the head
