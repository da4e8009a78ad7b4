"""The CPU data plane: tensors round-trip through named shared memory; messages carry metadata only."""
from __future__ import annotations

import os

import pytest
import torch

from cluster import messages as m
from cluster import shm

PREFIX = shm.segment_prefix(f"test{os.getpid()}")


@pytest.fixture(autouse=True)
def cleanup():
    yield
    shm.unlink_prefix(PREFIX)


def test_tensors_round_trip_bit_for_bit_across_dtypes_and_shapes():
    g = torch.Generator().manual_seed(0)
    tensors = {
        "f32": torch.randn(2, 3, 5, generator=g),
        "bf16": torch.randn(7, generator=g).to(torch.bfloat16),
        "f16_strided": torch.randn(4, 6, generator=g).half().t(),
        "i64": torch.arange(11),
        "bool": torch.tensor([True, False, True]),
        "scalar": torch.tensor(3.25),
        "empty": torch.zeros(0, 4),
    }
    metas = shm.write_tensors(PREFIX, tensors)
    assert len({meta.segment for meta in metas.values()}) == 1
    assert all(meta.offset % 64 == 0 for meta in metas.values())
    out = shm.read_tensors(metas)
    for k, t in tensors.items():
        assert out[k].dtype == t.dtype and out[k].shape == t.shape and torch.equal(out[k], t), k


def test_dispatch_message_carries_metadata_not_tensor_bytes():
    big = torch.randn(1024, 1024)    # 4 MiB
    metas = shm.write_tensors(PREFIX, {"x": big})
    msg = m.encode(m.Dispatch(1, "fn", "key", b"", metas, [], 10.0))
    assert len(msg) < 512
    assert m.executor_decoder.decode(msg).inputs["x"].nbytes == big.numel() * 4


def test_missing_segment_raises_shm_error():
    metas = shm.write_tensors(PREFIX, {"x": torch.ones(3)})
    shm.unlink(meta.segment for meta in metas.values())
    with pytest.raises(shm.ShmError, match="gone"):
        shm.read_tensors(metas)


@pytest.mark.parametrize("bad", [
    dict(segment="../../etc/passwd"),
    dict(segment="cc-x/../../etc"),
    dict(offset=10_000),
    dict(nbytes=8),
    dict(shape=[-1, 3]),
    dict(dtype="not_a_dtype"),
])
def test_metadata_that_does_not_fit_is_rejected(bad):
    meta = shm.write_tensors(PREFIX, {"x": torch.ones(3, 3)})["x"]
    fields = {f: getattr(meta, f) for f in meta.__struct_fields__}
    fields.update(bad)
    with pytest.raises(shm.ShmError):
        shm.read_tensors({"x": m.TensorMeta(**fields)})


def test_unlink_prefix_removes_a_lost_producers_segments():
    shm.write_tensors(PREFIX, {"a": torch.ones(2)})
    shm.write_tensors(PREFIX, {"b": torch.ones(2)})
    assert shm.unlink_prefix(PREFIX) == 2
    assert not [n for n in os.listdir(shm.SHM_DIR) if n.startswith(PREFIX)]
