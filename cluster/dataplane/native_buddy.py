"""ctypes binding of native/buddy.cpp with the interface of `BuddyAllocator`; `make_allocator`
picks the native one when it can be built and the Python one otherwise (same offsets either way)."""

from __future__ import annotations

import ctypes
from functools import lru_cache

from cluster.dataplane.buddy import BuddyAllocator
from cluster.dataplane.native_build import load

_u64, _i64, _vp = ctypes.c_uint64, ctypes.c_int64, ctypes.c_void_p


@lru_cache(maxsize=1)
def _lib() -> ctypes.CDLL | None:
    lib = load("buddy.cpp")
    if lib is None:
        return None
    for name, res, args in [
        ("bd_create", _vp, [_u64, _u64]),
        ("bd_destroy", None, [_vp]),
        ("bd_capacity", _u64, [_vp]),
        ("bd_alloc", _i64, [_vp, _u64]),
        ("bd_free", ctypes.c_int, [_vp, _u64]),
        ("bd_size_of", _i64, [_vp, _u64]),
        ("bd_free_bytes", _u64, [_vp]),
        ("bd_largest_free", _u64, [_vp]),
    ]:
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    return lib


def native_available() -> bool:
    return _lib() is not None


class NativeBuddyAllocator:
    def __init__(self, size: int, min_block: int = 256) -> None:
        lib = _lib()
        if lib is None:
            raise RuntimeError("the native buddy allocator could not be built (no C++ compiler?)")
        if min_block <= 0 or min_block & (min_block - 1) or size < min_block:
            raise ValueError(f"bad size/min_block {size}/{min_block}")
        self._lib = lib
        self._h = lib.bd_create(size, min_block)
        self.min_block = min_block
        self.capacity = lib.bd_capacity(self._h)
        self.max_order = (self.capacity // min_block).bit_length() - 1

    def __del__(self) -> None:
        if getattr(self, "_h", None):
            self._lib.bd_destroy(self._h)
            self._h = None

    def block_size(self, nbytes: int) -> int:
        blocks = max(1, -(-nbytes // self.min_block))
        return self.min_block << (blocks - 1).bit_length()

    def alloc(self, nbytes: int) -> int | None:
        off = self._lib.bd_alloc(self._h, nbytes)
        return None if off < 0 else off

    def free(self, offset: int) -> None:
        if self._lib.bd_free(self._h, offset) != 0:
            raise ValueError(f"offset {offset} is not an allocated block")

    def size_of(self, offset: int) -> int:
        n = self._lib.bd_size_of(self._h, offset)
        if n < 0:
            raise KeyError(offset)
        return n

    @property
    def free_bytes(self) -> int:
        return self._lib.bd_free_bytes(self._h)

    @property
    def largest_free(self) -> int:
        return self._lib.bd_largest_free(self._h)


def make_allocator(
    size: int, min_block: int = 256, native: bool | None = None
) -> BuddyAllocator | NativeBuddyAllocator:
    """The native allocator when available (or when `native` is True), else the Python one."""
    if native is None:
        native = native_available()
    return NativeBuddyAllocator(size, min_block) if native else BuddyAllocator(size, min_block)
