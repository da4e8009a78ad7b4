"""`comfy_api.torch_helpers`: torch.compile of a MODEL's diffusion model at sample time.

The diffusion model runs on the executors, so `set_torch_compile_wrapper` does what the TorchCompileModel node
does here: the MODEL (changed in place, as ComfyUI's wrapper is added in place) carries the backend, and each
executor's denoise step compiles the network it has loaded with torch.compile on that backend, once, and
reuses it. The other arguments (mode, options, fullgraph, dynamic) are kept in model_options under
TORCH_COMPILE_KWARGS as ComfyUI keeps them; they tune how torch.compile builds the graph, not what it computes,
and the executors compile the whole network (ComfyUI's default `keys=["diffusion_model"]`)."""

from __future__ import annotations

from typing import Any

COMPILE_KEY = "torch.compile"
TORCH_COMPILE_KWARGS = "torch_compile_kwargs"


def set_torch_compile_wrapper(
    model: Any,
    backend: str,
    options: dict | None = None,
    mode: str | None = None,
    fullgraph: bool = False,
    dynamic: bool | None = None,
    keys: list[str] | None = None,
    *args: Any,
    **kwargs: Any,
) -> None:
    """Compile `model`'s diffusion model with torch.compile(backend=...) when it samples (see the module)."""
    from nodes.inputs import require_model
    from nodes.modelfns.model_options import COMPILE

    ref = require_model(model)
    if not isinstance(backend, str) or not backend:
        raise ValueError(f"backend: expected the name of a torch.compile backend, got {backend!r}")
    # In place: a frozen ModelRef's options are replaced on this object, which the pack holds (a clone).
    object.__setattr__(ref, "options", ref.with_option(COMPILE, backend).options)
    model_options = getattr(ref, "model_options", None)
    if isinstance(model_options, dict):
        model_options[TORCH_COMPILE_KWARGS] = {
            "backend": backend,
            "options": options,
            "mode": mode,
            "fullgraph": fullgraph,
            "dynamic": dynamic,
        }


__all__ = ["set_torch_compile_wrapper", "COMPILE_KEY", "TORCH_COMPILE_KWARGS"]
