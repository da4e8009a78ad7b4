"""The model code imported without what an image never runs (`defer()`, called by `nodes.models` first).

Measured on 2 CPUs (`python -X importtime`), importing SD1's three classes cost 5-6 s, most of it not theirs:
- diffusers' model packages (`diffusers.models.transformers`, `.autoencoders`, `.unets`) import every class
  they hold when any one of their modules is imported: SD1's UNet blocks import one transformer module, and
  with it a hundred DiT families (0.5-1 s). Each is put in `sys.modules` without running its `__init__`,
  which runs on the first attribute asked of the package (`from diffusers.models.transformers import X`
  still works); a submodule imported by name needs no `__init__`.
- `torch._dynamo` (the compiler, with sympy, torch.distributed and torch._inductor: 1.6-2.3 s) is imported by
  diffusers to mark classes for the compiler (`allow_in_graph`) and to exempt its cache hooks from it
  (`torch.compiler.disable`), and by transformers to mark functions (`assume_constant_result`).
- scipy's optimizers and distributions (0.9 s): transformers' object-detection losses import
  `linear_sum_assignment`, diffusers' schedulers `scipy.stats` for their beta schedules.
- `transformers.models`, whose code indexes the 500 model folders it holds (0.4 s) to import one lazily;
  CLIP's modules are imported by name.
Each of those modules is replaced by a stand-in that takes what is asked of it at import time (marking a
class, wrapping a function); anything else asked of it, or the import of one of its submodules, runs the
real module's code in the same module object (as a plain import would have, before the submodule), which
is then handed what the stand-in was given. A stand-in's function runs the real one. While
torch._dynamo is not imported nothing can be compiling, so a function given to `disable` runs as it is;
once it is, it runs under the real `disable`. Nothing here changes what runs: the same classes, built and
called the same way. `defer()` imports nothing: a finder first on `sys.meta_path` defers each of those
modules when something imports it (the head process, which imports nodes.models but never the model
code, pays nothing).
"""

from __future__ import annotations

import functools
import importlib
import importlib.abc
import sys
import threading
from collections.abc import Callable
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

DIFFUSERS_PACKAGES = ("diffusers.models.transformers", "diffusers.models.autoencoders", "diffusers.models.unets")
DYNAMO = "torch._dynamo"
# submodules of torch._dynamo the model code imports by name (transformers.masking_utils, a torch function
# mode): they need nothing of the package's code, so they are imported without running it
DYNAMO_SUBMODULES = ("torch._dynamo._trace_wrapped_higher_order_op",)
SCIPY = {"scipy.optimize": ("linear_sum_assignment",), "scipy.stats": (), "scipy.integrate": ()}
# transformers' model registry: building its index of 500 model folders (0.4 s) is not needed to import one
TRANSFORMERS_PACKAGES = ("transformers.models",)
_lock = threading.RLock()  # one thread runs a deferred module's code; the others wait for it
# deferred module -> (stand-ins, on_load, whether its code runs before any of its submodules is imported)
_deferred: dict[str, tuple[dict[str, Callable | None], Callable[[ModuleType], None] | None, bool]] = {}
_loaders: dict[str, Callable[[], ModuleType]] = {}  # deferred and imported -> runs its code (once)
_loaded: set[str] = set()
_alone = threading.local()  # depth of DYNAMO_SUBMODULES imports in progress on this thread


def defer() -> None:
    """Defer the modules above when they are imported, from now on (those imported already stay as they are)."""
    with _lock:
        defer_dynamo()
        for name, functions in SCIPY.items():
            defer_module(name, {f: None for f in functions})
        for name in DIFFUSERS_PACKAGES + TRANSFORMERS_PACKAGES:
            defer_module(name, before_submodules=False)  # their code only imports every submodule
        if DeferredImports not in sys.meta_path:
            sys.meta_path.insert(0, DeferredImports)


def defer_module(
    name: str,
    stand_ins: dict[str, Callable | None] | None = None,
    on_load: Callable[[ModuleType], None] | None = None,
    before_submodules: bool = True,
) -> None:
    """When module `name` is imported, put it in sys.modules with its code not run yet; it runs on the first
    attribute asked of it that `stand_ins` does not hold (a name mapped to None stands for the real function
    of that name, running the module when called), and (`before_submodules`) before one of its submodules
    is imported; then `on_load(module)`."""
    if name not in sys.modules:
        _deferred[name] = (dict(stand_ins or {}), on_load, before_submodules)


class DeferredImports(importlib.abc.MetaPathFinder):
    """First on sys.meta_path: hands the deferred modules a loader that defers them, and runs a deferred
    module's code before one of its submodules is imported, as a plain import would have."""

    @classmethod
    def find_spec(cls, fullname: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if fullname in DYNAMO_SUBMODULES or getattr(_alone, "depth", 0):
            spec = cls._real_spec(fullname, path, target)
            if spec is not None and spec.loader is not None and fullname in DYNAMO_SUBMODULES:
                spec.loader = AloneLoader(spec.loader)
            return spec
        parent = fullname.rpartition(".")[0]
        while parent:
            if parent in _loaders and _deferred[parent][2] and parent not in _loaded:
                _loaders[parent]()
            parent = parent.rpartition(".")[0]
        if fullname not in _deferred or fullname in sys.modules:
            return None  # the usual finders find it
        spec = cls._real_spec(fullname, path, target)
        if spec is None or spec.loader is None:
            return None
        spec.loader = DeferredLoader(spec.loader)
        return spec

    @classmethod
    def invalidate_caches(cls) -> None:
        """`importlib.invalidate_caches()` calls this on every finder of sys.meta_path, which holds this class
        itself (not an instance): it caches nothing."""

    @classmethod
    def _real_spec(cls, fullname: str, path: Any, target: Any) -> ModuleSpec | None:
        for finder in sys.meta_path:
            if finder is not cls and hasattr(finder, "find_spec"):
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    return spec
        return None


class AloneLoader(importlib.abc.Loader):
    """Runs a submodule of torch._dynamo (and what it imports) without running the package's code."""

    def __init__(self, real: importlib.abc.Loader) -> None:
        self.real = real

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self.real.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        _alone.depth = getattr(_alone, "depth", 0) + 1
        try:
            self.real.exec_module(module)
        finally:
            _alone.depth -= 1


class DeferredLoader(importlib.abc.Loader):
    """Installs a deferred module's stand-ins instead of running its code (see defer_module)."""

    def __init__(self, real: importlib.abc.Loader) -> None:
        self.real = real

    def __getattr__(self, attr: str) -> Any:  # resource readers and the like: the real loader's
        return getattr(self.real, attr)

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self.real.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        name = module.__name__
        stand_ins, on_load, _ = _deferred[name]
        real_loader = self.real
        parent, _, child = name.rpartition(".")

        def load() -> ModuleType:
            with _lock:
                if name not in _loaded:
                    for attr in ("__getattr__", *stand_ins):
                        vars(module).pop(attr, None)
                    module.__loader__ = real_loader
                    if module.__spec__ is not None:
                        module.__spec__.loader = real_loader
                    _loaded.add(name)
                    try:
                        real_loader.exec_module(module)
                    except Exception as err:  # not an AttributeError, which __getattr__'s caller takes for "absent"
                        raise ImportError(f"running the deferred module {name}: {err!r}") from err
                    real = sys.modules.get(name, module)
                    if real is not module:  # its code put a lazy module in its place (transformers')
                        for attr, value in list(vars(module).items()):  # its submodules imported meanwhile
                            if isinstance(value, ModuleType) and value.__name__ == f"{name}.{attr}":
                                setattr(real, attr, value)
                        if parent:
                            setattr(sys.modules[parent], child, real)
                    if on_load is not None:
                        on_load(real)
            return sys.modules.get(name, module)

        def __getattr__(attr: str) -> Any:
            if attr.startswith("__"):  # import machinery probing: not a reason to run the module
                raise AttributeError(attr)
            return getattr(load(), attr)

        def real_function(attr: str) -> Callable:
            def call(*args: Any, **kwargs: Any) -> Any:
                return getattr(load(), attr)(*args, **kwargs)

            call.__name__ = call.__qualname__ = attr
            return call

        module.__getattr__ = __getattr__  # type: ignore[attr-defined]
        for attr, value in stand_ins.items():
            setattr(module, attr, value if value is not None else real_function(attr))
        _loaders[name] = load


def load(name: str) -> ModuleType:
    """Module `name`, its code run if it was deferred."""
    module = importlib.import_module(name)
    return _loaders[name]() if name in _loaders else module


def is_loaded(name: str) -> bool:
    """Whether module `name`'s own code has run in this process (not only a stand-in)."""
    return name in sys.modules and (name not in _loaders or name in _loaded)


def defer_dynamo() -> None:
    """Stand in for torch._dynamo until something needs more than marking classes and functions."""
    allowed: list[Any] = []
    disabled: list[tuple[Callable, bool, dict, list[Callable]]] = []  # (fn, recursive, options, its real wrap)

    def allow_in_graph(fn: Any) -> Any:
        allowed.append(fn)
        return fn

    def assume_constant_result(fn: Any) -> Any:  # the real one only marks the function so
        fn._dynamo_marked_constant = True
        return fn

    def disable(fn: Callable | None = None, recursive: bool = True, **kwargs: Any) -> Any:
        if fn is None:
            return lambda f: disable(f, recursive, **kwargs)
        if isinstance(fn, type) or is_loaded(DYNAMO):  # a class: the real decorator's business
            return load(DYNAMO).disable(fn, recursive, **kwargs)
        wrapped: list[Callable] = []  # the real decorator's function, once the real module is loaded
        disabled.append((fn, recursive, kwargs, wrapped))

        @functools.wraps(fn)
        def call(*args: Any, **kw: Any) -> Any:
            return (wrapped[0] if wrapped else fn)(*args, **kw)

        return call

    def handed_over(dynamo: ModuleType) -> None:
        for fn in allowed:
            dynamo.allow_in_graph(fn)
        for fn, recursive, kwargs, wrapped in disabled:
            wrapped.append(dynamo.disable(fn, recursive, **kwargs))

    defer_module(
        DYNAMO,
        {"allow_in_graph": allow_in_graph, "disable": disable, "assume_constant_result": assume_constant_result},
        on_load=handed_over,
    )
