"""The slower tiers and the copy between them: disk (safetensors), host memory, host -> device.

`HostToDevice` is the PCIe stand-in on CPU: a copy that takes at least nbytes / bandwidth seconds
(it sleeps the rest, releasing the GIL, so compute overlaps it as it would overlap a DMA). On a GPU
it copies on its own CUDA stream and records an event the compute stream waits on; the layers it
fills are allocated from that stream's pool and retired through it (see `empty` and `retire`).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file


class DiskTier:
    """One safetensors file per model under `root`."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def path(self, key: str) -> Path:
        return self.root / f"{key}.safetensors"

    def has(self, key: str) -> bool:
        return self.path(key).is_file()

    def save(self, key: str, tensors: dict[str, torch.Tensor]) -> None:
        tmp = self.path(key).with_suffix(".tmp")
        save_file({k: v.contiguous() for k, v in tensors.items()}, str(tmp))
        tmp.replace(self.path(key))

    def load(self, key: str, names: list[str]) -> dict[str, torch.Tensor]:
        with safe_open(str(self.path(key)), framework="pt") as f:
            return {n: f.get_tensor(n) for n in names}


def held_bytes(t: torch.Tensor, pinned: bool) -> int:
    """Host memory a tensor holds. Pinned tensors come from torch's caching host allocator, which
    rounds every block up to a power of two (and keeps freed blocks cached for the next pinned ones),
    so counting their nbytes would undercount by up to 2x."""
    n = t.numel() * t.element_size()
    return 1 << (n - 1).bit_length() if pinned and n > 1 else n


class HostTier:
    """Whole models in host memory (pinned on a GPU machine), LRU beyond `capacity` bytes counted as
    the allocator holds them; a model dropped from here is written to disk first so it is never lost."""

    def __init__(self, disk: DiskTier, capacity: int | None = None, pin: bool = False) -> None:
        self.disk, self.capacity, self.pin = disk, capacity, pin
        self._models: OrderedDict[str, dict[str, torch.Tensor]] = OrderedDict()
        self.loads_from_disk = 0

    def nbytes(self) -> int:
        return sum(held_bytes(t, self.pin) for m in self._models.values() for t in m.values())

    def put(self, key: str, tensors: dict[str, torch.Tensor]) -> None:
        host = {k: v.detach().to("cpu").contiguous() for k, v in tensors.items()}
        if self.pin:
            host = {k: v.pin_memory() for k, v in host.items()}
        self._models[key] = host
        self._models.move_to_end(key)
        self._shrink()

    def has(self, key: str) -> bool:
        return key in self._models or self.disk.has(key)

    def drop(self, key: str) -> None:
        """Forget `key` here and on disk."""
        self._models.pop(key, None)
        self.disk.path(key).unlink(missing_ok=True)

    def get(self, key: str, names: list[str]) -> dict[str, torch.Tensor]:
        model = self._models.get(key)
        if model is None:  # third tier: read the layer from disk
            self.loads_from_disk += 1
            return self.disk.load(key, names)
        self._models.move_to_end(key)
        return {n: model[n] for n in names}

    def _shrink(self) -> None:
        while self.capacity is not None and len(self._models) > 1 and self.nbytes() > self.capacity:
            key, tensors = self._models.popitem(last=False)
            if not self.disk.has(key):
                self.disk.save(key, tensors)


class HostToDevice:
    def __init__(self, device: torch.device | str = "cpu", bandwidth: float | None = None) -> None:
        self.device = torch.device(device)
        self.bandwidth = bandwidth  # bytes/s; None = as fast as the copy goes
        self.stream = torch.cuda.Stream(self.device) if self.device.type == "cuda" else None

    def empty(self, shape: torch.Size, dtype: torch.dtype) -> torch.Tensor:
        """Memory for a layer to be copied in. On a GPU it comes from the copier stream's pool: a block
        freed while a copy into it is in flight is then reused only by work queued behind that copy."""
        if self.stream is None:
            return torch.empty(shape, dtype=dtype, device=self.device)
        with torch.cuda.stream(self.stream):
            return torch.empty(shape, dtype=dtype, device=self.device)

    def retire(self, tensors: dict[str, torch.Tensor], event: object | None) -> None:
        """Before a layer's memory is given back (evicted): its copy must have landed, since an arena
        block is reused at once, and the allocator must not hand the block to the copier again before
        the compute stream's reads queued so far (the evicting thread's current stream) are done."""
        if event is not None:
            event.synchronize()
        if self.stream is not None:
            compute = torch.cuda.current_stream(self.device)
            for t in tensors.values():
                t.record_stream(compute)

    def synchronize(self) -> None:
        """Wait until every copy issued so far has landed (timing a load measures the copy, not its issue)."""
        if self.stream is not None:
            self.stream.synchronize()

    @property
    def shares_host_memory(self) -> bool:
        """A CPU device with no bandwidth to emulate: host memory is device memory, so a layer can run
        from its host tensors as they are (copying them would only double the memory and the time)."""
        return self.device.type == "cpu" and not self.bandwidth

    def copy(self, src: dict[str, torch.Tensor], dst: dict[str, torch.Tensor]) -> object | None:
        """Copy src[k] into dst[k]; returns a CUDA event to wait on (GPU) or None (done)."""
        t0 = time.perf_counter()
        nbytes = sum(t.numel() * t.element_size() for t in src.values())
        if self.stream is not None:
            with torch.cuda.stream(self.stream):
                for k, t in src.items():
                    dst[k].copy_(t, non_blocking=True)
                event = torch.cuda.Event()
                event.record(self.stream)
            return event
        for k, t in src.items():
            dst[k].copy_(t)
        if self.bandwidth:
            remaining = nbytes / self.bandwidth - (time.perf_counter() - t0)
            if remaining > 0:
                time.sleep(remaining)
        return None
