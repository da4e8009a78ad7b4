"""The model code imported without what an image never runs (`defer()`, called by `nodes.models` first).

Measured on 2 CPUs (`python -X importtime`), importing SD1's three classes costs 5-6 s, most of it not theirs:
- diffusers' model packages (`diffusers.models.transformers`, `.autoencoders`, `.unets`) import every class
  they hold when any one of their modules is imported: SD1's UNet blocks import one transformer module, and
  with it a hundred DiT families (0.5-1 s). Each is put in `sys.modules` without running its `__init__`,
  which runs on the first attribute asked of the package (`from diffusers.models.transformers import X`
  still works); a submodule imported by name needs no `__init__`.
- `torch._dynamo` (the compiler, with sympy, torch.distributed and torch._inductor: 1.6-2.3 s) is imported by
  diffusers to mark classes for the compiler (`allow_in_graph`) and to exempt its cache hooks from it
  (`torch.compiler.disable`), and by transformers to mark functions (`assume_constant_result`). A stand-in
  takes those calls; anything else asked of it imports the real
  module, which is then handed what the stand-in was given. While the real module is not imported nothing
  can be compiling, so a function given to `disable` runs as it is; once it is, it runs under the real
  `disable`.
Nothing here changes what runs: the same classes, built and called the same way.
"""
from __future__ import annotations

import functools
import importlib.util
import sys
import threading
from types import ModuleType
from typing import Any, Callable

DIFFUSERS_PACKAGES = ("diffusers.models.transformers", "diffusers.models.autoencoders", "diffusers.models.unets")
DYNAMO = "torch._dynamo"
STAND_INS = ("__getattr__", "allow_in_graph", "disable", "assume_constant_result")
_lock = threading.RLock()


def defer() -> None:
    """Install the stand-in for torch._dynamo and the deferred diffusers packages, unless imported already."""
    with _lock:
        defer_dynamo()
        for name in DIFFUSERS_PACKAGES:
            defer_package(name)


def defer_package(name: str) -> None:
    """Put package `name` in sys.modules with its `__init__` not run yet (run on its first attribute)."""
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)   # imports the parents (diffusers' are lazy modules)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)

    def __getattr__(attr: str) -> Any:
        if attr.startswith("__"):   # import machinery probing: not a reason to run the package
            raise AttributeError(attr)
        with _lock:
            if vars(module).get("__getattr__") is __getattr__:
                del module.__getattr__
                spec.loader.exec_module(module)
        return getattr(module, attr)

    module.__getattr__ = __getattr__   # type: ignore[attr-defined]
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    setattr(sys.modules[parent], child, module)


def defer_dynamo() -> None:
    """Stand in for torch._dynamo until something needs more than `allow_in_graph` and `disable`."""
    if DYNAMO in sys.modules:
        return
    import torch
    spec = importlib.util.find_spec(DYNAMO)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    allowed: list[Any] = []
    real: list[ModuleType] = []   # the module once its code has run

    def load() -> ModuleType:
        with _lock:
            if not real:
                for name in STAND_INS:
                    vars(module).pop(name, None)
                spec.loader.exec_module(module)
                for fn in allowed:
                    module.allow_in_graph(fn)
                real.append(module)
        return module

    def __getattr__(attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return getattr(load(), attr)

    def allow_in_graph(fn: Any) -> Any:
        allowed.append(fn)
        return fn

    def assume_constant_result(fn: Any) -> Any:   # the real one only marks the function so
        fn._dynamo_marked_constant = True
        return fn

    def disable(fn: Callable | None = None, recursive: bool = True, **kwargs: Any) -> Any:
        if fn is None:
            return lambda f: disable(f, recursive, **kwargs)
        if isinstance(fn, type):   # a class: the real decorator's business
            return load().disable(fn, recursive, **kwargs)
        disabled: list[Callable] = []

        @functools.wraps(fn)
        def call(*args: Any, **kw: Any) -> Any:
            if not real:
                return fn(*args, **kw)
            if not disabled:
                disabled.append(real[0].disable(fn, recursive, **kwargs))
            return disabled[0](*args, **kw)
        return call

    module.__getattr__ = __getattr__   # type: ignore[attr-defined]
    module.allow_in_graph = allow_in_graph   # type: ignore[attr-defined]
    module.disable = disable   # type: ignore[attr-defined]
    module.assume_constant_result = assume_constant_result   # type: ignore[attr-defined]
    sys.modules[DYNAMO] = module
    torch._dynamo = module   # type: ignore[attr-defined]


def dynamo_imported() -> bool:
    """Whether torch._dynamo's own code has run in this process (not only the stand-in)."""
    module = sys.modules.get(DYNAMO)
    return module is not None and "__getattr__" not in vars(module)
