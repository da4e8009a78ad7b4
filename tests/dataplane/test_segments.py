"""Segments by name: a lost executor's are removed by its prefix, and names from other processes are checked."""

from __future__ import annotations

import os

import pytest

from cluster.dataplane import segments

PREFIX = segments.safe_prefix(f"test{os.getpid()}")


def test_unlink_prefix_removes_a_lost_producers_segments():
    for name in ("a", "b"):
        segments.create(PREFIX + name, 64).close()
    try:
        assert segments.unlink_prefix(PREFIX) == 2
        assert not [n for n in os.listdir(segments.SHM_DIR) if n.startswith(PREFIX)]
    finally:
        segments.unlink_prefix(PREFIX)


@pytest.mark.parametrize("name", ["../../etc/passwd", "cc-x/../../etc", "not-ours"])
def test_names_that_would_leave_the_folder_are_refused(name):
    with pytest.raises(segments.SegmentError):
        segments.path_of(name)
    with pytest.raises(segments.SegmentError):
        segments.unlink_prefix(name + "/")
