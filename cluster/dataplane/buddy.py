"""Buddy allocator (Knowlton) over an abstract byte range: offsets in, offsets out.

The arena of an executor is one fixed region; this hands out power-of-two blocks of it. The
policy is fixed so the Python and native (native/buddy.cpp) allocators give the same offsets on
the same sequence of calls: take the smallest order that fits, and within it the lowest address;
split keeping the lower half. Freeing merges a block with its buddy while the buddy is free.
"""

from __future__ import annotations

import heapq


class BuddyAllocator:
    """Manages `capacity` bytes (a power-of-two multiple of `min_block`) starting at offset 0."""

    def __init__(self, size: int, min_block: int = 256) -> None:
        if min_block <= 0 or min_block & (min_block - 1):
            raise ValueError("min_block must be a power of two")
        if size < min_block:
            raise ValueError(f"size {size} is smaller than one block of {min_block}")
        self.min_block = min_block
        self.max_order = (size // min_block).bit_length() - 1
        self.capacity = min_block << self.max_order  # the rest of `size` is left unused
        # Per order: a min-heap of offsets (lowest address first) and the set that is truly free;
        # heap entries not in the set are stale (merged away) and skipped lazily.
        self._heaps: list[list[int]] = [[] for _ in range(self.max_order + 1)]
        self._free: list[set[int]] = [set() for _ in range(self.max_order + 1)]
        self._used: dict[int, int] = {}  # offset -> order
        self._push(0, self.max_order)

    def _push(self, offset: int, order: int) -> None:
        self._free[order].add(offset)
        heapq.heappush(self._heaps[order], offset)

    def _pop_lowest(self, order: int) -> int | None:
        heap, free = self._heaps[order], self._free[order]
        while heap:
            off = heapq.heappop(heap)
            if off in free:
                free.discard(off)
                return off
        return None

    def order_for(self, nbytes: int) -> int:
        blocks = max(1, -(-nbytes // self.min_block))
        return (blocks - 1).bit_length()

    def block_size(self, nbytes: int) -> int:
        """Bytes a request of `nbytes` occupies (its power-of-two block)."""
        return self.min_block << self.order_for(nbytes)

    def alloc(self, nbytes: int) -> int | None:
        """Offset of a block of at least `nbytes`, or None when no free block is large enough."""
        want = self.order_for(nbytes)
        if want > self.max_order:
            return None
        for order in range(want, self.max_order + 1):
            off = self._pop_lowest(order)
            if off is None:
                continue
            while order > want:  # split, keeping the lower half
                order -= 1
                self._push(off + (self.min_block << order), order)
            self._used[off] = want
            return off
        return None

    def free(self, offset: int) -> None:
        order = self._used.pop(offset, None)
        if order is None:
            raise ValueError(f"offset {offset} is not an allocated block")
        while order < self.max_order:
            buddy = offset ^ (self.min_block << order)
            if buddy not in self._free[order]:
                break
            self._free[order].discard(buddy)  # its heap entry goes stale
            offset = min(offset, buddy)
            order += 1
        self._push(offset, order)

    def size_of(self, offset: int) -> int:
        return self.min_block << self._used[offset]

    @property
    def free_bytes(self) -> int:
        return sum(len(s) * (self.min_block << o) for o, s in enumerate(self._free))

    @property
    def largest_free(self) -> int:
        for order in range(self.max_order, -1, -1):
            if self._free[order]:
                return self.min_block << order
        return 0

    def free_blocks(self) -> list[tuple[int, int]]:
        """(offset, size) of every free block, sorted by offset (for tests and stats)."""
        return sorted((off, self.min_block << o) for o, s in enumerate(self._free) for off in s)

    def used_blocks(self) -> list[tuple[int, int]]:
        return sorted((off, self.min_block << o) for off, o in self._used.items())
