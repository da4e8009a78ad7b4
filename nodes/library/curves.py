"""Today's ComfyUI curves (`comfy_extras.nodes_curve`, added after 0.3.64): the CURVE value a curve-editor widget
gives ({"points": [[x, y], ...], "interpolation": "monotone_cubic" | "linear"}, or bare points), as an object
other nodes evaluate on [0, 1] (`interp`, `interp_array`, `to_lut`), and the Curve Editor node that makes it.

The monotone cubic is the Fritsch-Carlson Hermite spline the web UI's editor draws, so what a node computes
follows the curve the user sees."""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np

log = logging.getLogger(__name__)


class CurveInput:
    """A curve through control points, evaluated on x in [0, 1]; ends hold their end values."""

    def __init__(self, control_points: list) -> None:
        pts = sorted(((float(x), float(y)) for x, y in control_points), key=lambda p: p[0])
        self._points = pts
        self._xs = np.array([p[0] for p in pts], dtype=np.float64)
        self._ys = np.array([p[1] for p in pts], dtype=np.float64)

    @property
    def points(self) -> list[tuple[float, float]]:
        return list(self._points)

    def interp(self, x: float) -> float:
        return float(self.interp_array(np.array([x], dtype=np.float64))[0])

    def interp_array(self, xs: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def to_lut(self, size: int = 256) -> np.ndarray:
        """`size` samples at evenly spaced x from 0 to 1 (float64)."""
        return self.interp_array(np.linspace(0.0, 1.0, size))

    @staticmethod
    def from_raw(data: Any) -> CurveInput:
        """A curve from a widget value: a curve, {"points", "interpolation"} or a list of (x, y) pairs."""
        if isinstance(data, CurveInput):
            return data
        points, interpolation = (
            (data.get("points"), data.get("interpolation", "monotone_cubic"))
            if isinstance(data, dict)
            else (data, "monotone_cubic")
        )
        try:
            pairs = [(float(x), float(y)) for x, y in points]
        except (TypeError, ValueError):
            raise ValueError(f"Curve: the points must be a list of [x, y] number pairs, not {points!r}") from None
        if interpolation == "linear":
            return LinearCurve(pairs)
        if interpolation != "monotone_cubic":
            log.warning("Curve: unknown interpolation %r, using monotone_cubic", interpolation)
        return MonotoneCubicCurve(pairs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(points={self._points})"


class LinearCurve(CurveInput):
    """Straight segments between the points."""

    def interp_array(self, xs: np.ndarray) -> np.ndarray:
        if len(self._xs) == 0:
            return np.zeros_like(xs, dtype=np.float64)
        if len(self._xs) == 1:
            return np.full_like(xs, self._ys[0], dtype=np.float64)
        return np.interp(xs, self._xs, self._ys)


class MonotoneCubicCurve(CurveInput):
    """Cubic Hermite segments with Fritsch-Carlson tangents: no overshoot between points, flat where the data is."""

    def __init__(self, control_points: list) -> None:
        super().__init__(control_points)
        self._slopes = self._tangents()

    def _tangents(self) -> np.ndarray:
        xs, ys, n = self._xs, self._ys, len(self._xs)
        if n < 2:
            return np.zeros(n, dtype=np.float64)
        dx, dy = np.diff(xs), np.diff(ys)
        secants = np.where(dx == 0, 0.0, dy / np.where(dx == 0, 1.0, dx))
        m = np.empty(n, dtype=np.float64)
        m[0], m[-1] = secants[0], secants[-1]
        for i in range(1, n - 1):
            # a peak or valley (secants of opposite sign) gets a flat tangent; otherwise the mean secant
            m[i] = 0.0 if secants[i - 1] * secants[i] <= 0 else (secants[i - 1] + secants[i]) / 2
        for i in range(n - 1):
            if secants[i] == 0:
                m[i] = m[i + 1] = 0.0
                continue
            a, b = m[i] / secants[i], m[i + 1] / secants[i]
            if a * a + b * b > 9:  # outside the monotonicity circle: scale both tangents back onto it
                scale = 3 / math.sqrt(a * a + b * b)
                m[i], m[i + 1] = scale * a * secants[i], scale * b * secants[i]
        return m

    def interp_array(self, xs_in: np.ndarray) -> np.ndarray:
        xs, ys, m, n = self._xs, self._ys, self._slopes, len(self._xs)
        if n == 0:
            return np.zeros_like(xs_in, dtype=np.float64)
        if n == 1:
            return np.full_like(xs_in, ys[0], dtype=np.float64)
        hi = np.searchsorted(xs, xs_in, side="right").clip(1, n - 1)
        lo = hi - 1
        h = xs[hi] - xs[lo]
        t = np.where(h == 0, 0.0, (xs_in - xs[lo]) / np.where(h == 0, 1.0, h))
        t2, t3 = t * t, t * t * t
        value = (
            (2 * t3 - 3 * t2 + 1) * ys[lo]
            + (t3 - 2 * t2 + t) * h * m[lo]
            + (-2 * t3 + 3 * t2) * ys[hi]
            + (t3 - t2) * h * m[hi]
        )
        value = np.where(xs_in <= xs[0], ys[0], value)
        return np.where(xs_in >= xs[-1], ys[-1], value)


class CurveEditor:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_curve"
    FUNCTION = "execute"
    CATEGORY = "utils"

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "curve": (
                    "CURVE",
                    {
                        "default": {"points": [[0.0, 0.0], [1.0, 1.0]], "interpolation": "monotone_cubic"},
                        "socketless": True,
                    },
                )
            },
            "optional": {"histogram": ("HISTOGRAM", {"tooltip": "Levels shown behind the curve in the editor."})},
        }

    RETURN_TYPES = ("CURVE",)
    RETURN_NAMES = ("curve",)
    OUTPUT_TOOLTIPS = (None,)
    DESCRIPTION = "A curve drawn in the editor (optionally over a histogram), for nodes that map levels through it."

    def execute(self, curve: Any, histogram: Any = None):
        result = (CurveInput.from_raw(curve),)
        if histogram is None:
            return result
        return {"ui": {"histogram": histogram if isinstance(histogram, list) else list(histogram)}, "result": result}


NODE_CLASS_MAPPINGS = {"CurveEditor": CurveEditor}
NODE_DISPLAY_NAME_MAPPINGS = {"CurveEditor": "Curve Editor"}
