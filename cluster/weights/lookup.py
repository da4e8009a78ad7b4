"""Weight virtualization: a layer lookup table from a model's logical layers to physical tensors.

The model object is a skeleton built on the meta device; executing it needs its parameters bound.
`bind` points a layer's parameter and buffer entries at given tensors (wherever they live: framework
memory, an arena block, a GPU) without copying, `unbind` points them back at meta tensors so the
physical memory can be reused. forward() sees ordinary tensors either way.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn


@dataclass
class LayerEntry:
    names: list[str]
    nbytes: int
    region: str | None = None  # "framework", "arena" or None (not resident)
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)


def split_layers(model: nn.Module, blocks: list[nn.Module]) -> list[list[str]]:
    """Parameter/buffer names per logical layer: one per block, in execution order. Names outside
    every block (embeddings, final norm, head) join layer 0, so they load first and are evicted last."""
    owner: dict[int, int] = {}
    for i, block in enumerate(blocks):
        for m in block.modules():
            owner.setdefault(id(m), i)
    layers: list[list[str]] = [[] for _ in blocks]
    for mod_name, mod in model.named_modules():
        i = owner.get(id(mod), 0)
        for leaf, _ in list(mod.named_parameters(recurse=False)) + list(mod.named_buffers(recurse=False)):
            layers[i].append(f"{mod_name}.{leaf}" if mod_name else leaf)
    return layers


class LayerTable:
    def __init__(self, model: nn.Module, layers: list[list[str]]) -> None:
        self.model = model
        self._slots: dict[str, tuple[nn.Module, str, bool]] = {}
        self.specs: dict[str, tuple[torch.Size, torch.dtype]] = {}
        self.entries: list[LayerEntry] = []
        for names in layers:
            nbytes = 0
            for name in names:
                mod_name, _, leaf = name.rpartition(".")
                mod = model.get_submodule(mod_name)
                is_param = leaf in mod._parameters
                t = mod._parameters[leaf] if is_param else mod._buffers[leaf]
                self._slots[name] = (mod, leaf, is_param)
                self.specs[name] = (t.shape, t.dtype)
                nbytes += t.numel() * t.element_size()
            self.entries.append(LayerEntry(list(names), nbytes))

    def bind(self, layer: int, tensors: dict[str, torch.Tensor], region: str) -> None:
        entry = self.entries[layer]
        for name in entry.names:
            t = tensors[name]
            if (t.shape, t.dtype) != self.specs[name]:
                raise ValueError(f"{name}: got {tuple(t.shape)} {t.dtype}, expected {self.specs[name]}")
            self._set(name, t)
        entry.tensors = {n: tensors[n] for n in entry.names}
        entry.region = region

    def unbind(self, layer: int) -> None:
        entry = self.entries[layer]
        for name in entry.names:
            shape, dtype = self.specs[name]
            self._set(name, torch.empty(shape, dtype=dtype, device="meta"))
        entry.tensors, entry.region = {}, None

    def _set(self, name: str, t: torch.Tensor) -> None:
        mod, leaf, is_param = self._slots[name]
        if is_param:
            mod._parameters[leaf] = nn.Parameter(t, requires_grad=False)  # shares t's storage
        else:
            mod._buffers[leaf] = t
