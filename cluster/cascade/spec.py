"""Cascades as first-class objects: a light model, a heavy model, a discriminator, an SLO and the
policy limits the controller works within. Declared in the workspace as `cascades/*.yaml`:

    name: sd1-fast                     # defaults to the file name
    light: {checkpoint: sd1-tiny.safetensors, steps: 2, cfg: 1.0}
    heavy: {checkpoint: sdxl-tiny.safetensors, steps: 12, cfg: 7.0, sampler: euler, scheduler: normal}
    discriminator: cascade-demo-discriminator.safetensors
    slo_s: 5.0
    policy:
      threshold: auto                  # or a number: a static cascade
      thresholds: {min: 0.0, max: 1.0, step: 0.005}
      batch_sizes: [1, 2, 4, 8]
      max_executors: 8
      headroom: 1.2                    # demand over-provisioning factor
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


@dataclass(frozen=True)
class StageSpec:
    checkpoint: str
    steps: int = 20
    cfg: float = 7.0
    sampler: str = "euler"
    scheduler: str = "normal"

    @classmethod
    def parse(cls, data: Any, where: str) -> StageSpec:
        if isinstance(data, str):
            return cls(checkpoint=data)
        if not isinstance(data, dict) or "checkpoint" not in data:
            raise ValueError(f"{where}: expected a checkpoint name or a mapping with 'checkpoint'")
        unknown = set(data) - {"checkpoint", "steps", "cfg", "sampler", "scheduler"}
        if unknown:
            raise ValueError(f"{where}: unknown keys {sorted(unknown)}")
        return cls(
            str(data["checkpoint"]),
            int(data.get("steps", 20)),
            float(data.get("cfg", 7.0)),
            str(data.get("sampler", "euler")),
            str(data.get("scheduler", "normal")),
        )


@dataclass(frozen=True)
class Policy:
    threshold: float | None = None  # None: adaptive (the controller decides)
    threshold_min: float = 0.0
    threshold_max: float = 1.0
    threshold_step: float = 0.005
    batch_sizes: tuple[int, ...] = (1, 2, 4, 8)
    max_executors: int | None = None  # None: as many as the cluster lends
    headroom: float = 1.2

    @property
    def adaptive(self) -> bool:
        return self.threshold is None

    def grid(self) -> tuple[float, ...]:
        if not self.adaptive:
            return (float(self.threshold),)
        n = int(round((self.threshold_max - self.threshold_min) / self.threshold_step))
        return tuple(round(self.threshold_min + i * self.threshold_step, 6) for i in range(n + 1))

    @classmethod
    def parse(cls, data: Any, where: str) -> Policy:
        data = data or {}
        if not isinstance(data, dict):
            raise ValueError(f"{where}: expected a mapping")
        t = data.get("threshold", "auto")
        grid = data.get("thresholds") or {}
        batches = tuple(int(b) for b in data.get("batch_sizes", (1, 2, 4, 8)))
        if not batches or min(batches) < 1:
            raise ValueError(f"{where}.batch_sizes: need positive integers")
        policy = cls(
            None if t in ("auto", None) else float(t),
            float(grid.get("min", 0.0)),
            float(grid.get("max", 1.0)),
            float(grid.get("step", 0.005)),
            tuple(sorted(set(batches))),
            None if data.get("max_executors") is None else int(data["max_executors"]),
            float(data.get("headroom", 1.2)),
        )
        if not 0.0 <= policy.threshold_min <= policy.threshold_max <= 1.0 or policy.threshold_step <= 0:
            raise ValueError(f"{where}.thresholds: need 0 <= min <= max <= 1 and step > 0")
        return policy


@dataclass(frozen=True)
class CascadeSpec:
    name: str
    light: StageSpec
    heavy: StageSpec
    discriminator: str
    slo_s: float = 5.0
    policy: Policy = field(default_factory=Policy)
    source: str = ""  # the file it came from, or "node" when declared by a graph

    @classmethod
    def parse(cls, data: Any, name: str = "", source: str = "") -> CascadeSpec:
        where = source or name or "cascade"
        if not isinstance(data, dict):
            raise ValueError(f"{where}: expected a mapping")
        for key in ("light", "heavy", "discriminator"):
            if key not in data:
                raise ValueError(f"{where}: missing '{key}'")
        slo = float(data.get("slo_s", 5.0))
        if slo <= 0:
            raise ValueError(f"{where}.slo_s: must be positive")
        return cls(
            str(data.get("name") or name),
            StageSpec.parse(data["light"], f"{where}.light"),
            StageSpec.parse(data["heavy"], f"{where}.heavy"),
            str(data["discriminator"]),
            slo,
            Policy.parse(data.get("policy"), f"{where}.policy"),
            source,
        )


def cascades_dir(root: Path) -> Path:
    return Path(root) / "cascades"


def load_cascades(root: Path) -> dict[str, CascadeSpec]:
    """Every `cascades/*.yaml` (and .yml) under a workspace root, by name; a bad file raises ValueError
    naming the file, so a typo is found at start-up rather than at the first query."""
    out: dict[str, CascadeSpec] = {}
    folder = cascades_dir(root)
    if not folder.is_dir():
        return out
    for path in sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")]):
        spec = CascadeSpec.parse(yaml.safe_load(path.read_text()), path.stem, str(path))
        if spec.name in out:
            raise ValueError(f"{path}: cascade {spec.name!r} is also declared in {out[spec.name].source}")
        out[spec.name] = spec
    return out
