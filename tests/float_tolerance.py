"""Tolerances that follow from float32 arithmetic, not from the machine a reference was recorded on.

torch picks its CPU kernels by instruction set (AVX-512, AVX2, ...) and each set sums in its own order, so
the same formula gives results a few units in the last place (ulps) apart. ComfyUI's own outputs differ the
same way between machines. A bound in ulps of the result's largest magnitude states that directly.
"""

from __future__ import annotations

import math

import numpy as np

FLOAT32_EPS = float(np.finfo(np.float32).eps)


def float32_ulp(magnitude: float) -> float:
    """The spacing of float32 values at `magnitude` (the size of one rounding there)."""
    if magnitude == 0:
        return float(np.finfo(np.float32).tiny)
    return FLOAT32_EPS * 2.0 ** math.floor(math.log2(abs(magnitude)))


def ulps_of_largest(values, ulps: int) -> float:
    """`ulps` roundings at the largest magnitude among `values` (a tensor or an array)."""
    largest = float(np.abs(np.asarray(values, dtype=np.float64)).max()) if np.size(values) else 0.0
    return ulps * float32_ulp(largest)
