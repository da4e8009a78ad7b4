"""Schedulers that read published noise-level tables: ComfyUI's AlignYourStepsScheduler
(comfy_extras.nodes_align_your_steps), GITSScheduler (comfy_extras.nodes_gits) and OptimalStepsScheduler
(comfy_extras.nodes_optimalsteps). Model-free: each returns a SIGMAS tensor.

The tables (noise_levels.json) are the schedules Align Your Steps (Sabour et al. 2024), GITS (Chen et al.
2024) and Optimal Steps (Jin et al. 2025) published, as ComfyUI 0.3.64 ships them (dumped from its modules by
scripts/record_sampler_references.py). A step count the table does not hold is interpolated linearly in
log sigma.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

CATEGORY = "sampling/custom_sampling/schedulers"
_TABLES = json.loads((Path(__file__).resolve().parent / "noise_levels.json").read_text())
DENOISE = (
    "FLOAT",
    {
        "default": 1.0,
        "min": 0.0,
        "max": 1.0,
        "step": 0.01,
        "tooltip": "The share of the schedule kept (its low-noise end), for img2img.",
    },
)


def loglinear_interp(levels: list[float], count: int) -> np.ndarray:
    """`count` decreasing levels spaced evenly in position along the table, interpolating log sigma."""
    xs = np.linspace(0, 1, len(levels))
    ys = np.log(np.asarray(levels[::-1], dtype=np.float64))
    return np.exp(np.interp(np.linspace(0, 1, count), xs, ys))[::-1].copy()


def _finish(levels: list[float] | np.ndarray, steps: int, denoise: float) -> torch.Tensor:
    """The last round(steps * denoise) steps of a steps-long schedule, ending at 0; empty at denoise <= 0."""
    if denoise <= 0.0:
        return torch.FloatTensor([])
    kept = steps if denoise >= 1.0 else round(steps * denoise)
    out = list(levels)[-(kept + 1) :]
    out[-1] = 0.0
    return torch.FloatTensor(out)


def _table_schedule(levels: list[float], steps: int, denoise: float) -> torch.Tensor:
    if steps + 1 != len(levels):
        levels = loglinear_interp(levels, steps + 1)
    return _finish(levels, steps, denoise)


class AlignYourStepsScheduler:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_align_your_steps"
    RETURN_TYPES = ("SIGMAS",)
    FUNCTION = "get_sigmas"
    CATEGORY = CATEGORY
    DESCRIPTION = "Align Your Steps' optimised noise levels for SD1, SDXL or SVD, stretched to the step count."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model_type": ("COMBO", {"multiselect": False, "options": list(_TABLES["align_your_steps"])}),
                "steps": ("INT", {"default": 10, "min": 1, "max": 10000}),
                "denoise": DENOISE,
            }
        }

    def get_sigmas(self, model_type: str, steps: int, denoise: float) -> tuple[torch.Tensor]:
        return (_table_schedule(_TABLES["align_your_steps"][model_type], steps, denoise),)


class GITSScheduler:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_gits"
    RETURN_TYPES = ("SIGMAS",)
    FUNCTION = "get_sigmas"
    CATEGORY = CATEGORY
    DESCRIPTION = (
        "GITS' searched schedules (SD1 noise levels) for 2 to 20 steps at a chosen coefficient; "
        "more steps stretch the 20-step one."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "coeff": ("FLOAT", {"default": 1.20, "min": 0.80, "max": 1.50, "step": 0.05}),
                "steps": ("INT", {"default": 10, "min": 2, "max": 1000}),
                "denoise": DENOISE,
            }
        }

    def get_sigmas(self, coeff: float, steps: int, denoise: float) -> tuple[torch.Tensor]:
        rows = _TABLES["gits"].get(f"{round(coeff, 2):.2f}")
        if rows is None:
            raise ValueError(f"coeff: {coeff} is not one of the tabulated 0.80, 0.85, ..., 1.50")
        if steps <= 20:
            return (_finish(rows[steps - 2], steps, denoise),)
        return (_finish(loglinear_interp(rows[-1], steps + 1), steps, denoise),)


class OptimalStepsScheduler:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_optimalsteps"
    RETURN_TYPES = ("SIGMAS",)
    FUNCTION = "get_sigmas"
    CATEGORY = CATEGORY
    DESCRIPTION = "Optimal Steps' noise levels for Flux, Wan or Chroma, stretched to the step count."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model_type": ("COMBO", {"multiselect": False, "options": list(_TABLES["optimal_steps"])}),
                "steps": ("INT", {"default": 20, "min": 3, "max": 1000}),
                "denoise": DENOISE,
            }
        }

    def get_sigmas(self, model_type: str, steps: int, denoise: float) -> tuple[torch.Tensor]:
        return (_table_schedule(_TABLES["optimal_steps"][model_type], steps, denoise),)


NODE_CLASS_MAPPINGS = {cls.__name__: cls for cls in (AlignYourStepsScheduler, GITSScheduler, OptimalStepsScheduler)}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
