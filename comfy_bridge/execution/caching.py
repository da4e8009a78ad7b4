"""Output, UI and node-instance caches, keyed by input signature (or by node id for instances).

A node's input signature covers its class, its IS_CHANGED value, its constants and, through links, the
signatures of everything upstream. ComfyUI spells that out as the list of all ancestors' signatures; we
compute the same information as a Merkle digest (each link contributes the digest of its source), which is
linear in the graph size and needs no recursion, so 5,000-node prompts sign in milliseconds. The only
observable difference: two *identical* upstream sub-graphs under different ids count as one.
"""

from __future__ import annotations

import hashlib
import math
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from comfy_bridge.execution.graph import DynamicPrompt
from comfy_bridge.execution.graph_utils import is_link


def _encode(obj: Any, out: list[str]) -> None:
    """Canonical text of a constant; values that cannot be compared become a fresh token (never equal)."""
    if obj is None:
        out.append("N")
    elif isinstance(obj, (bool, int, float)):
        if isinstance(obj, float) and math.isnan(obj):
            out.append("U" + uuid.uuid4().hex)  # NaN: "always changed"
        elif isinstance(obj, float) and not math.isinf(obj) and obj == int(obj):
            out.append(f"I{int(obj)}")  # 1 == 1.0 == True, as in ComfyUI's tuple/frozenset keys
        elif isinstance(obj, float):
            out.append("F" + repr(obj))
        else:
            out.append(f"I{int(obj)}")
    elif isinstance(obj, str):
        out.append(f"S{len(obj)}:{obj}")
    elif isinstance(obj, Mapping):
        items = []
        for k, v in obj.items():
            kk: list[str] = []
            _encode(k, kk)
            vv: list[str] = []
            _encode(v, vv)
            items.append(("".join(kk), "".join(vv)))
        out.append("{" + "".join(f"{k}={v};" for k, v in sorted(items)) + "}")
    elif isinstance(obj, Sequence):
        out.append("[")
        for item in obj:
            _encode(item, out)
            out.append(",")
        out.append("]")
    else:
        out.append("U" + uuid.uuid4().hex)


IsChangedFn = Callable[[str], Awaitable[Any]]


class Signer:
    """Computes input-signature keys for one prompt (memoised per node id)."""

    def __init__(self, dynprompt: DynamicPrompt, is_changed: IsChangedFn, includes_node_id: Callable[[str], bool]):
        self.dynprompt = dynprompt
        self.is_changed = is_changed
        self.includes_node_id = includes_node_id
        self.memo: dict[str, str] = {}

    async def signature(self, node_id: str) -> str:
        if node_id in self.memo:
            return self.memo[node_id]
        # Iterative post-order over ancestors: deep chains must not hit the recursion limit.
        stack: list[tuple[str, bool]] = [(node_id, False)]
        visiting: set[str] = set()
        while stack:
            current, expanded = stack.pop()
            if current in self.memo or (current in visiting and not expanded):
                continue
            if not self.dynprompt.has_node(current):
                self.memo[current] = "missing:" + uuid.uuid4().hex
                continue
            inputs = self.dynprompt.get_node(current)["inputs"]
            parents = [v[0] for v in inputs.values() if is_link(v) and v[0] not in self.memo]
            if not expanded:
                visiting.add(current)
                stack.append((current, True))
                stack.extend((p, False) for p in parents if p not in visiting)
                continue
            for p in parents:  # still unsigned after its turn: part of a cycle; such keys never match
                self.memo.setdefault(p, "cycle:" + uuid.uuid4().hex)
            self.memo[current] = await self._immediate(current)
        return self.memo[node_id]

    async def _immediate(self, node_id: str) -> str:
        node = self.dynprompt.get_node(node_id)
        parts: list[str] = []
        _encode(node["class_type"], parts)
        parts.append("|")
        _encode(await self.is_changed(node_id), parts)
        if self.includes_node_id(node_id):
            parts.append("|id:")
            _encode(node_id, parts)
        for name in sorted(node["inputs"]):
            value = node["inputs"][name]
            parts.append("|")
            _encode(name, parts)
            parts.append("=")
            if is_link(value):
                parts.append(f"A{self.memo[value[0]]}:{value[1]}")
            else:
                _encode(value, parts)
        return hashlib.blake2b("".join(parts).encode("utf-8", "surrogatepass"), digest_size=20).hexdigest()


class KeySet:
    """node id -> data key and node id -> sub-cache key, for the nodes one cache level knows."""

    def __init__(self, dynprompt: DynamicPrompt, signer: Signer | None):
        self.dynprompt = dynprompt
        self.signer = signer  # None: keyed by (node_id, class_type)
        self.keys: dict[str, Any] = {}
        self.subcache_keys: dict[str, tuple] = {}

    async def add_keys(self, node_ids: Any) -> None:
        for node_id in node_ids:
            if node_id in self.keys or not self.dynprompt.has_node(node_id):
                continue
            id_key = (node_id, self.dynprompt.get_node(node_id)["class_type"])
            self.keys[node_id] = await self.signer.signature(node_id) if self.signer else id_key
            self.subcache_keys[node_id] = id_key

    def all_node_ids(self) -> set[str]:
        return set(self.keys)


class BasicCache:
    def __init__(self, by_signature: bool):
        self.by_signature = by_signature
        self.initialized = False
        self.dynprompt: DynamicPrompt | None = None
        self.signer: Signer | None = None
        self.key_set: KeySet | None = None
        self.cache: dict[Any, Any] = {}
        self.subcaches: dict[tuple, BasicCache] = {}

    async def set_prompt(self, dynprompt: DynamicPrompt, node_ids: Any, signer: Signer) -> None:
        self.dynprompt, self.signer = dynprompt, signer
        self.key_set = KeySet(dynprompt, signer if self.by_signature else None)
        await self.key_set.add_keys(node_ids)
        self.initialized = True

    def all_node_ids(self) -> set[str]:
        ids = self.key_set.all_node_ids()
        for sub in self.subcaches.values():
            ids |= sub.all_node_ids()
        return ids

    def clean_unused(self) -> None:
        keep = set(self.key_set.keys.values())
        for key in [k for k in self.cache if k not in keep]:
            del self.cache[key]
        self._clean_subcaches()

    def _clean_subcaches(self) -> None:
        keep = set(self.key_set.subcache_keys.values())
        for key in [k for k in self.subcaches if k not in keep]:
            del self.subcaches[key]

    def _set_immediate(self, node_id: str, value: Any) -> None:
        self.cache[self.key_set.keys.get(node_id)] = value

    def _get_immediate(self, node_id: str) -> Any:
        if not self.initialized:
            return None
        return self.cache.get(self.key_set.keys.get(node_id))

    async def _ensure_subcache(self, node_id: str, children_ids: Any) -> BasicCache:
        key = self.key_set.subcache_keys.get(node_id)
        sub = self.subcaches.get(key)
        if sub is None:
            sub = self.subcaches[key] = BasicCache(self.by_signature)
        await sub.set_prompt(self.dynprompt, children_ids, self.signer)
        return sub

    def _get_subcache(self, node_id: str) -> BasicCache | None:
        return self.subcaches.get(self.key_set.subcache_keys.get(node_id))


class HierarchicalCache(BasicCache):
    """Classic mode: keep only what the current prompt can reuse; expansions live in per-parent sub-caches."""

    def _cache_for(self, node_id: str) -> BasicCache | None:
        chain = []
        parent = self.dynprompt.get_parent_node_id(node_id)
        while parent is not None:
            chain.append(parent)
            parent = self.dynprompt.get_parent_node_id(parent)
        cache: BasicCache | None = self
        for parent in reversed(chain):
            cache = cache._get_subcache(parent)
            if cache is None:
                return None
        return cache

    def get(self, node_id: str) -> Any:
        if not self.initialized:
            return None
        cache = self._cache_for(node_id)
        return None if cache is None else cache._get_immediate(node_id)

    def set(self, node_id: str, value: Any) -> None:
        cache = self._cache_for(node_id)
        assert cache is not None
        cache._set_immediate(node_id, value)

    async def ensure_subcache_for(self, node_id: str, children_ids: Any) -> BasicCache:
        cache = self._cache_for(node_id)
        assert cache is not None
        return await cache._ensure_subcache(node_id, children_ids)


class LRUCache(BasicCache):
    """--cache-lru N: keep up to N entries, evicting those unused for the most prompts."""

    def __init__(self, by_signature: bool, max_size: int = 100):
        super().__init__(by_signature)
        self.max_size = max_size
        self.min_generation = 0
        self.generation = 0
        self.used_generation: dict[Any, int] = {}
        self.children: dict[Any, list] = {}

    async def set_prompt(self, dynprompt: DynamicPrompt, node_ids: Any, signer: Signer) -> None:
        await super().set_prompt(dynprompt, node_ids, signer)
        self.generation += 1
        for node_id in node_ids:
            self._mark_used(node_id)

    def clean_unused(self) -> None:
        while len(self.cache) > self.max_size and self.min_generation < self.generation:
            self.min_generation += 1
            for key in [k for k in self.cache if self.used_generation[k] < self.min_generation]:
                del self.cache[key]
                del self.used_generation[key]
                self.children.pop(key, None)
        self._clean_subcaches()

    def _mark_used(self, node_id: str) -> None:
        key = self.key_set.keys.get(node_id)
        if key is not None:
            self.used_generation[key] = self.generation

    def get(self, node_id: str) -> Any:
        if not self.initialized:
            return None
        self._mark_used(node_id)
        return self._get_immediate(node_id)

    def set(self, node_id: str, value: Any) -> None:
        self._mark_used(node_id)
        self._set_immediate(node_id, value)

    async def ensure_subcache_for(self, node_id: str, children_ids: Any) -> BasicCache:
        # Sub-caches only track which expansions are live; the entries themselves stay in this flat cache.
        await self._ensure_subcache(node_id, children_ids)
        await self.key_set.add_keys(children_ids)
        self._mark_used(node_id)
        key = self.key_set.keys.get(node_id)
        self.children[key] = []
        for child in children_ids:
            self._mark_used(child)
            self.children[key].append(self.key_set.keys.get(child))
        return self


class DependencyAwareCache(HierarchicalCache):
    """--cache-none: nothing survives a prompt, and an output is dropped once all its consumers ran."""

    def __init__(self, by_signature: bool):
        super().__init__(by_signature)
        self.descendants: dict[str, set[str]] = {}
        self.ancestors: dict[str, set[str]] = {}
        self.executed_nodes: set[str] = set()

    async def set_prompt(self, dynprompt: DynamicPrompt, node_ids: Any, signer: Signer) -> None:
        self.cache.clear()
        self.subcaches.clear()
        self.descendants.clear()
        self.ancestors.clear()
        self.executed_nodes.clear()
        await super().set_prompt(dynprompt, node_ids, signer)
        for node_id in node_ids:
            self.descendants.setdefault(node_id, set())
            self.ancestors.setdefault(node_id, set())
        for node_id in node_ids:
            for value in dynprompt.get_node(node_id)["inputs"].values():
                if is_link(value):
                    self.descendants.setdefault(value[0], set()).add(node_id)
                    self.ancestors[node_id].add(value[0])

    def set(self, node_id: str, value: Any) -> None:
        super().set(node_id, value)
        self.executed_nodes.add(node_id)
        for ancestor in self.ancestors.get(node_id, ()):
            if ancestor in self.executed_nodes and self.descendants.get(ancestor, set()) <= self.executed_nodes:
                self._remove_node(ancestor)

    def _remove_node(self, node_id: str) -> None:
        cache = self._cache_for(node_id)
        if cache is not None:
            cache.cache.pop(cache.key_set.keys.get(node_id), None)

    async def ensure_subcache_for(self, node_id: str, children_ids: Any) -> BasicCache:
        sub = await super().ensure_subcache_for(node_id, children_ids)
        for child in children_ids:
            self.descendants.setdefault(node_id, set()).add(child)
            self.ancestors.setdefault(child, set()).add(node_id)
        return sub

    def clean_unused(self) -> None:
        pass


class CacheSet:
    """outputs + ui (by signature) and objects (by node id) in one of ComfyUI's three modes."""

    def __init__(self, cache_type: str = "classic", cache_size: int = 0):
        if cache_type == "none":
            self.outputs: BasicCache = DependencyAwareCache(True)
            self.ui: BasicCache = DependencyAwareCache(True)
            self.objects: BasicCache = DependencyAwareCache(False)
        elif cache_type == "lru":
            self.outputs = LRUCache(True, max_size=cache_size)
            self.ui = LRUCache(True, max_size=cache_size)
            self.objects = HierarchicalCache(False)
        elif cache_type == "classic":
            self.outputs = HierarchicalCache(True)
            self.ui = HierarchicalCache(True)
            self.objects = HierarchicalCache(False)
        else:
            raise ValueError(f"unknown cache type {cache_type!r} (classic, lru, none)")
        self.all = [self.outputs, self.ui, self.objects]
