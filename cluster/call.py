"""One ModelFn call as one typed message: `ModelFnCall`, built once by the runtime, carried unchanged by the
head (its invocation, its `Dispatch`) and decoded once by the executor into the ModelFn's own parameter
struct (`ModelFn.Params`, a `Params` subclass such as nodes.modelfns.denoise.DenoiseParams).

On the wire the parameters are the struct's msgpack map, so any msgspec decoder reads them (a test decodes
a captured dispatch frame into `DenoiseParams`). Scalars are typed fields; structured values (conditioning
entries, sampling configs) keep their exact Python shape through three msgpack extension types: a tuple, a
`ModelRef` (a `ModelSpec`, as the call's own weights are), and an object the wire cannot express. Only the
last is pickled, into the call's one opaque field `objects`: the Python callables node packs hand over
(model_options patches, a pack node's origin) and option values that are objects (merge steps, hook
groups). A plain call carries none, and its `objects` is empty.
"""

from __future__ import annotations

import pickle
from typing import Any

import msgspec

from cluster.refs import ModelRef, Patch


class Params(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The parameters of one ModelFn's calls; each ModelFn declares its subclass as `Params`. Unknown or
    mistyped fields are refused by name (msgspec.ValidationError) when a call is made or decoded."""

    def replace(self, **changes: Any) -> Params:
        return msgspec.structs.replace(self, **changes)


class NoParams(Params):
    """A ModelFn that takes no parameters."""


class PatchSpec(msgspec.Struct, array_like=True, frozen=True):
    """A cluster.refs.Patch on the wire: a LoRA file, its digest and strength."""

    path: str
    digest: str
    strength: float


class ModelSpec(msgspec.Struct, array_like=True, frozen=True):
    """A ModelRef's fields on the wire (cluster.refs.ModelRef has their meaning). `options` holds values of
    any kind, so it is msgpack made by `pack` (its objects in the call's opaque field)."""

    component: str
    arch: str
    sources: tuple[str, ...]
    digests: tuple[str, ...]
    patches: tuple[PatchSpec, ...]
    options: msgspec.Raw


class ModelFnCall(msgspec.Struct, frozen=True):
    """Which ModelFn, on which weights, with which parameters (everything but the tensors, which the data
    plane carries as handles beside it). `params` is msgpack made by `pack`; `objects` is the call's one
    opaque field (see the module docstring)."""

    fn: str
    model: ModelSpec | None  # None: a ModelFn without weights
    params: msgspec.Raw  # the ModelFn's Params struct as a msgpack map
    objects: bytes = b""  # pickle of the objects the extension type OBJECT indexes; b"": none


# msgpack extension codes of the values the wire keeps exactly
TUPLE, REF, OBJECT = 1, 2, 3
_encoder = msgspec.msgpack.Encoder()
_PLAIN = (str, float, bool, bytes, type(None))
_KEYS = (str, int, float, bool, type(None))


class _Packer:
    """Turns a value into msgpack-encodable data, keeping tuples and ModelRefs and setting objects aside."""

    def __init__(self) -> None:
        self.objects: list[Any] = []

    def value(self, v: Any) -> Any:
        t = type(v)
        if t in _PLAIN or (t is int and -(2**63) <= v < 2**64):
            return v
        if t is list:
            return [self.value(x) for x in v]
        if t is dict and all(type(k) in _KEYS for k in v):
            return {k: self.value(x) for k, x in v.items()}
        if t is tuple:
            return msgspec.msgpack.Ext(TUPLE, _encoder.encode([self.value(x) for x in v]))
        if t is ModelRef:
            return msgspec.msgpack.Ext(REF, _encoder.encode(self.spec(v)))
        self.objects.append(v)  # a callable, a subclass (Patches, a proxy ref), an object: pickled
        return msgspec.msgpack.Ext(OBJECT, (len(self.objects) - 1).to_bytes(4, "little"))

    def spec(self, r: ModelRef) -> ModelSpec:
        patches = tuple(PatchSpec(p.path, p.digest, p.strength) for p in r.patches)
        options = msgspec.Raw(_encoder.encode(self.value(r.options)))
        return ModelSpec(r.component, r.arch, r.sources, r.digests, patches, options)


def _plain_ref(r: ModelRef) -> ModelRef:
    """A proxy's (a ModelRef subclass) plain fields: the weights it names are all an executor needs."""
    return r if type(r) is ModelRef else ModelRef(r.component, r.arch, r.sources, r.digests, r.patches, r.options)


def pack(fn: str, model: ModelRef | None, params: Params) -> ModelFnCall:
    """The message of calling `fn` on `model` with `params` (already of the ModelFn's Params type)."""
    packer = _Packer()
    spec = None if model is None else packer.spec(_plain_ref(model))
    fields = {name: packer.value(getattr(params, name)) for name in params.__struct_fields__}
    objects = pickle.dumps(packer.objects, protocol=pickle.HIGHEST_PROTOCOL) if packer.objects else b""
    return ModelFnCall(fn, spec, msgspec.Raw(_encoder.encode(fields)), objects)


class _Unpacker:
    def __init__(self, objects: bytes) -> None:
        self._blob = objects
        self._objects: list[Any] | None = None

    def hook(self, code: int, data: memoryview) -> Any:
        if code == TUPLE:
            return tuple(self.decode(data))
        if code == REF:
            return self.ref(msgspec.msgpack.decode(data, type=ModelSpec))
        if code == OBJECT:
            if self._objects is None:
                self._objects = pickle.loads(self._blob) if self._blob else []
            return self._objects[int.from_bytes(data, "little")]
        raise ValueError(f"unknown msgpack extension type {code} in a ModelFn call")

    def decode(self, data: bytes | memoryview) -> Any:
        return msgspec.msgpack.decode(data, ext_hook=self.hook)

    def ref(self, spec: ModelSpec | None) -> ModelRef | None:
        if spec is None:
            return None
        patches = tuple(Patch(p.path, p.digest, p.strength) for p in spec.patches)
        return ModelRef(spec.component, spec.arch, spec.sources, spec.digests, patches, self.decode(spec.options))


def unpack(call: ModelFnCall, params_type: type[Params]) -> tuple[ModelRef | None, Params]:
    """(model, params) of `call`, its params as `params_type`; msgspec.ValidationError names a bad field."""
    u = _Unpacker(call.objects)
    return u.ref(call.model), msgspec.convert(u.decode(call.params), params_type)


def unpack_model(call: ModelFnCall) -> ModelRef | None:
    """The weights `call` names (what a preloader needs), without decoding its params."""
    return _Unpacker(call.objects).ref(call.model)


def typed(params_type: type[Params], params: Params | dict[str, Any] | None) -> Params:
    """`params` as `params_type`: a struct of that type as it is, a mapping converted (a clear
    msgspec.ValidationError names an unknown or mistyped field)."""
    if isinstance(params, params_type):
        return params
    if isinstance(params, Params):
        raise TypeError(f"expected {params_type.__name__} parameters, got {type(params).__name__}")
    return msgspec.convert(params or {}, params_type)
