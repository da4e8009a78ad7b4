"""`comfy.multigpu`: ComfyUI's multi-GPU model clones (a module newer than ComfyUI 0.3.64, which packs
guard with `hasattr(comfy, 'multigpu')`). Nothing imports it eagerly, so that check stays false as in
0.3.64 and packs take their single-device path; importing it explicitly works, and its functions refuse:
Comfy Cluster spreads work over executors, not over GPU clones of one model in the server process."""

from __future__ import annotations

from typing import Any

from comfy_bridge.packs.origin import UnsupportedFeature

_WHY = "Comfy Cluster spreads work over executors; it has no multi-GPU model clones (model_options['multigpu_clones'])"


def load_balance_devices(
    model_options: dict, total_work: int, return_idle_time: bool = False, work_normalized: Any = None
) -> Any:
    raise UnsupportedFeature("comfy.multigpu.load_balance_devices", _WHY)


def create_multigpu_deepclones(model: Any, max_gpus: int, gpu_options: Any = None, reuse_loaded: bool = False) -> Any:
    raise UnsupportedFeature("comfy.multigpu.create_multigpu_deepclones", _WHY)


__all__ = ["load_balance_devices", "create_multigpu_deepclones"]
