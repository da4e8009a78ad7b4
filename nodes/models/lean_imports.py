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
called the same way.
"""
from __future__ import annotations

import functools
import importlib.util
import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

DIFFUSERS_PACKAGES = ("diffusers.models.transformers", "diffusers.models.autoencoders", "diffusers.models.unets")
DYNAMO = "torch._dynamo"
# submodules of torch._dynamo the model code imports by name (transformers.masking_utils, a torch function
# mode): imported on their own before the stand-in is installed, as they need nothing of the package's code
DYNAMO_SUBMODULES = ("torch._dynamo._trace_wrapped_higher_order_op",)
SCIPY = {"scipy.optimize": ("linear_sum_assignment",), "scipy.stats": (), "scipy.integrate": ()}
# transformers' model registry: building its index of 500 model folders (0.4 s) is not needed to import one
TRANSFORMERS_PACKAGES = ("transformers.models",)
_lock = threading.RLock()   # one thread runs a deferred module's code; the others wait for it
_loaders: dict[str, Callable[[], ModuleType]] = {}   # deferred module -> runs its code (once)
_loaded: set[str] = set()
_whole: set[str] = set()   # deferred modules whose code runs before any of their submodules is imported


class SubmoduleImport:
    """On sys.meta_path: importing a submodule of a deferred module runs that module's code first."""

    @staticmethod
    def find_spec(fullname: str, path: Any = None, target: Any = None) -> None:
        parent = fullname.rpartition(".")[0]
        while parent:
            if parent in _whole and parent not in _loaded:
                _loaders[parent]()
            parent = parent.rpartition(".")[0]
        # nothing found here: the usual finders find it


def defer() -> None:
    """Defer the modules above, those not imported already."""
    with _lock:
        defer_dynamo()
        for name, functions in SCIPY.items():
            defer_module(name, {f: None for f in functions})
        for name in DIFFUSERS_PACKAGES + TRANSFORMERS_PACKAGES:
            defer_module(name, before_submodules=False)   # their code only imports every submodule
        if SubmoduleImport not in sys.meta_path:
            sys.meta_path.insert(0, SubmoduleImport)


def defer_module(name: str, stand_ins: dict[str, Callable | None] | None = None,
                 on_load: Callable[[ModuleType], None] | None = None,
                 before_submodules: bool = True) -> ModuleType | None:
    """Put module `name` in sys.modules with its code not run yet; it runs on the first attribute asked of
    the module that `stand_ins` does not hold (a name mapped to None stands for the real function of that
    name, loading the module when called), and (`before_submodules`) before a submodule of it is imported;
    then `on_load(module)`. None if `name` is imported already."""
    if name in sys.modules:
        return None
    spec = importlib.util.find_spec(name)   # imports the parents
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    stand_ins = dict(stand_ins or {})
    parent, _, child = name.rpartition(".")

    def load() -> ModuleType:
        with _lock:
            if name not in _loaded:
                for attr in ("__getattr__", *stand_ins):
                    vars(module).pop(attr, None)
                _loaded.add(name)
                try:
                    spec.loader.exec_module(module)
                except Exception as err:   # not an AttributeError, which __getattr__'s caller would take for "absent"
                    raise ImportError(f"running the deferred module {name}: {err!r}") from err
                real = sys.modules.get(name, module)
                if real is not module:   # a module whose code puts a lazy module in its place (transformers')
                    for attr, value in list(vars(module).items()):   # its submodules imported meanwhile
                        if isinstance(value, ModuleType) and value.__name__ == f"{name}.{attr}":
                            setattr(real, attr, value)
                    if parent:
                        setattr(sys.modules[parent], child, real)
                if on_load is not None:
                    on_load(real)
        return sys.modules.get(name, module)

    def __getattr__(attr: str) -> Any:
        if attr.startswith("__"):   # import machinery probing: not a reason to run the module
            raise AttributeError(attr)
        return getattr(load(), attr)

    def real_function(attr: str) -> Callable:
        def call(*args: Any, **kwargs: Any) -> Any:
            return getattr(load(), attr)(*args, **kwargs)
        call.__name__ = call.__qualname__ = attr
        return call

    module.__getattr__ = __getattr__   # type: ignore[attr-defined]
    for attr, value in stand_ins.items():
        setattr(module, attr, value if value is not None else real_function(attr))
    _loaders[name] = load
    if before_submodules:
        _whole.add(name)
    sys.modules[name] = module
    if parent:
        setattr(sys.modules[parent], child, module)
    return module


def load(name: str) -> ModuleType:
    """Module `name`, its code run if it was deferred."""
    return _loaders[name]() if name in _loaders else importlib.import_module(name)


def is_loaded(name: str) -> bool:
    """Whether module `name`'s own code has run in this process (not only a stand-in)."""
    return name in sys.modules and (name not in _loaders or name in _loaded)


def defer_dynamo() -> None:
    """Stand in for torch._dynamo until something needs more than marking classes and functions."""
    if DYNAMO in sys.modules:
        return
    import torch
    allowed: list[Any] = []
    disabled: list[tuple[Callable, bool, dict, list[Callable]]] = []   # (fn, recursive, options, its real wrap)

    def allow_in_graph(fn: Any) -> Any:
        allowed.append(fn)
        return fn

    def assume_constant_result(fn: Any) -> Any:   # the real one only marks the function so
        fn._dynamo_marked_constant = True
        return fn

    def disable(fn: Callable | None = None, recursive: bool = True, **kwargs: Any) -> Any:
        if fn is None:
            return lambda f: disable(f, recursive, **kwargs)
        if isinstance(fn, type) or is_loaded(DYNAMO):   # a class: the real decorator's business
            return load(DYNAMO).disable(fn, recursive, **kwargs)
        wrapped: list[Callable] = []   # the real decorator's function, once the real module is loaded
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

    module = defer_module(DYNAMO, {"allow_in_graph": allow_in_graph, "disable": disable,
                                   "assume_constant_result": assume_constant_result}, on_load=handed_over,
                          before_submodules=False)
    if module is None:
        return
    torch._dynamo = module   # type: ignore[attr-defined]
    for submodule in DYNAMO_SUBMODULES:
        importlib.import_module(submodule)
    _whole.add(DYNAMO)   # from now on a submodule's import runs the package's code first
