"""Node replacements, as today's ComfyUI keeps them (its NodeReplaceManager): a registry of `io.NodeReplace`
entries keyed by the deprecated class name, filled by the built-in list (node_replace_builtin.py), by packs
(`await ComfyAPI().node_replacement.register(io.NodeReplace(...))` in their extension's on_load) and by a
pack folder's `node_replacements.json`.

The web UI reads the registry (GET /node_replacements) to offer swapping a missing node for its successor;
POST /prompt rewrites an API-format prompt with it before validation, so a saved API prompt naming a
retired class still runs. Node packs are installed per process, so one registry serves every tenant."""

from __future__ import annotations

import json
import logging
from collections.abc import Collection
from pathlib import Path
from typing import Any

from comfy_bridge.compat.comfy_api.latest._io import NodeReplace

log = logging.getLogger(__name__)

REPLACEMENTS_FILE = "node_replacements.json"


def _is_link(value: Any) -> bool:
    return isinstance(value, list) and len(value) == 2 and isinstance(value[0], str) and isinstance(value[1], int)


class NodeReplaceManager:
    """{old class: [NodeReplace, ...]}, the first entry being the one applied and offered first."""

    def __init__(self) -> None:
        self._replacements: dict[str, list[NodeReplace]] = {}

    def register(self, node_replace: NodeReplace) -> None:
        """Add one replacement; the same (old, new) pair again is ignored (a pack reloaded in-process)."""
        if not isinstance(node_replace, NodeReplace):
            raise TypeError(f"node replacement must be an io.NodeReplace, got {type(node_replace).__name__}")
        for name in ("old_node_id", "new_node_id"):
            if not isinstance(getattr(node_replace, name), str) or not getattr(node_replace, name):
                raise ValueError(f"node replacement needs a non-empty {name}")
        entries = self._replacements.setdefault(node_replace.old_node_id, [])
        if any(e.new_node_id == node_replace.new_node_id for e in entries):
            log.debug(
                "node replacement %s -> %s already registered", node_replace.old_node_id, node_replace.new_node_id
            )
            return
        entries.append(node_replace)

    def get_replacement(self, old_node_id: str) -> list[NodeReplace] | None:
        return self._replacements.get(old_node_id)

    def has_replacement(self, old_node_id: str) -> bool:
        return old_node_id in self._replacements

    def as_dict(self, offered: Collection[str] | None = None) -> dict[str, list[dict]]:
        """The GET /node_replacements answer; with `offered`, only replacements by an offered class."""
        answer = {
            old: [r.as_dict() for r in entries if offered is None or r.new_node_id in offered]
            for old, entries in self._replacements.items()
        }
        return {old: entries for old, entries in answer.items() if entries}

    def load_from_json(self, module_dir: str | Path, module_name: str) -> int:
        """Register the entries of `module_dir`/node_replacements.json ({old class: [entry, ...]}, an
        entry's old_node_id defaulting to its key); a malformed file or entry is logged and skipped, so a
        pack's typo never stops the server. The number registered."""
        path = Path(module_dir) / REPLACEMENTS_FILE
        if not path.is_file():
            return 0
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            log.warning("%s of %s is not readable JSON, skipped: %s", REPLACEMENTS_FILE, module_name, exc)
            return 0
        if not isinstance(data, dict):
            log.warning("%s of %s must be a JSON object, skipped", REPLACEMENTS_FILE, module_name)
            return 0
        count = 0
        for old_node_id, entries in data.items():
            if not isinstance(entries, list):
                log.warning(
                    "%s of %s: the value of %r must be a list, skipped", REPLACEMENTS_FILE, module_name, old_node_id
                )
                continue
            for entry in entries:
                if not isinstance(entry, dict):
                    continue
                try:
                    self.register(
                        NodeReplace(
                            new_node_id=entry.get("new_node_id", ""),
                            old_node_id=entry.get("old_node_id", old_node_id),
                            old_widget_ids=entry.get("old_widget_ids"),
                            input_mapping=entry.get("input_mapping"),
                            output_mapping=entry.get("output_mapping"),
                        )
                    )
                    count += 1
                except (TypeError, ValueError) as exc:
                    log.warning("%s of %s: entry for %r skipped: %s", REPLACEMENTS_FILE, module_name, old_node_id, exc)
        if count:
            log.info("Loaded %d node replacement(s) from %s/%s", count, module_name, REPLACEMENTS_FILE)
        return count

    def apply_replacements(self, prompt: dict, offered: Collection[str]) -> None:
        """Rewrite, in place, every node of API-format `prompt` whose class is not `offered` but has a
        replacement whose class is: its class, its inputs through input_mapping (an input the mapping does
        not name is dropped, as in ComfyUI) and the links that read its outputs through output_mapping."""
        # The link lists themselves: a reader replaced too carries the same list into its new inputs.
        readers: dict[str, list[tuple[list, int]]] = {}
        stale = []
        for node_id, node in prompt.items():
            if not isinstance(node, dict) or not isinstance(node.get("inputs"), dict):
                continue
            class_type = node.get("class_type")
            if isinstance(class_type, str) and class_type not in offered and class_type in self._replacements:
                stale.append(node_id)
            for value in node["inputs"].values():
                if _is_link(value):
                    readers.setdefault(value[0], []).append((value, value[1]))
        for node_id in stale:
            node = prompt[node_id]
            replacement = self._replacements[node["class_type"]][0]
            if replacement.new_node_id not in offered:  # a swap to a missing class only confuses the error
                continue
            inputs: dict[str, Any] = {}
            for entry in replacement.input_mapping or ():
                if "set_value" in entry:
                    inputs[entry["new_id"]] = entry["set_value"]
                elif entry.get("old_id") in node["inputs"]:  # an optional input left out stays out
                    inputs[entry["new_id"]] = node["inputs"][entry["old_id"]]
            prompt[node_id] = {
                **node,
                "class_type": replacement.new_node_id,
                "inputs": inputs,
                "_meta": dict(node.get("_meta") or {}),
            }
            moves = {m["old_idx"]: m["new_idx"] for m in replacement.output_mapping or ()}
            for link, old_idx in readers.get(node_id, ()):
                if old_idx in moves:
                    link[1] = moves[old_idx]


_manager: NodeReplaceManager | None = None


def node_replace_manager() -> NodeReplaceManager:
    """The process's registry, holding ComfyUI's built-in replacements from its first use on."""
    global _manager
    if _manager is None:
        from comfy_bridge.node_replace_builtin import register_builtin

        _manager = NodeReplaceManager()
        register_builtin(_manager)
    return _manager
