"""`comfy_api.torch_helpers`: torch.compile of a MODEL's modules at sample time.

The diffusion model runs on the executors, not in the pack's process, so there is no module here to
compile: `set_torch_compile_wrapper` raises UnsupportedFeature naming that."""
from __future__ import annotations

from typing import Any

from comfy_bridge.packs.origin import UnsupportedFeature

COMPILE_KEY = "torch.compile"
TORCH_COMPILE_KWARGS = "torch_compile_kwargs"


def set_torch_compile_wrapper(model: Any, backend: str, options: dict | None = None, mode: str | None = None,
                              fullgraph: bool = False, dynamic: bool | None = None,
                              keys: list[str] | None = None, *args: Any, **kwargs: Any) -> None:
    raise UnsupportedFeature("comfy_api.torch_helpers.set_torch_compile_wrapper",
                             "the diffusion model runs on the executors, not in this process, so it cannot be "
                             "torch.compile'd from a node")


__all__ = ["set_torch_compile_wrapper", "COMPILE_KEY", "TORCH_COMPILE_KWARGS"]
