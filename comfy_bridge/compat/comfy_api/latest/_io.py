"""The V3 node API (`comfy_api.latest.io`): schemas, typed inputs/outputs and the `ComfyNode` base.

A V3 node class also answers the V1 attribute names (INPUT_TYPES, RETURN_TYPES, FUNCTION, ...) so the
engine and the registry treat both generations alike.
"""
from __future__ import annotations

import copy
import inspect
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Literal


class FolderType(str, Enum):
    input = "input"
    output = "output"
    temp = "temp"


class UploadType(str, Enum):
    image = "image_upload"
    audio = "audio_upload"
    video = "video_upload"
    model = "file_upload"


class NumberDisplay(str, Enum):
    number = "number"
    slider = "slider"
    color = "color"


def prune_dict(d: dict) -> dict:
    """Drop None values: /object_info omits options that were not given."""
    return {k: v for k, v in d.items() if v is not None}


class RemoteOptions:
    def __init__(self, route: str, refresh_button: bool, control_after_refresh: Literal["first", "last"] = "first",
                 timeout: int | None = None, max_retries: int | None = None, refresh: int | None = None):
        self.route, self.refresh_button, self.control_after_refresh = route, refresh_button, control_after_refresh
        self.timeout, self.max_retries, self.refresh = timeout, max_retries, refresh

    def as_dict(self) -> dict:
        return prune_dict({"route": self.route, "refresh_button": self.refresh_button,
                           "control_after_refresh": self.control_after_refresh, "timeout": self.timeout,
                           "max_retries": self.max_retries, "refresh": self.refresh})


class _StringIOType(str):
    """A type name that matches "*" and overlapping comma-separated unions when compared with !=."""

    def __ne__(self, value: object) -> bool:
        if self == "*" or value == "*":
            return False
        if not isinstance(value, str):
            return True
        a, b = frozenset(self.split(",")), frozenset(value.split(","))
        return not (a <= b or b <= a)

    __hash__ = str.__hash__


class _ComfyType:
    Type: Any = Any
    io_type: str | None = None


class Input:
    """One input of a V3 schema."""
    Parent: type | None = None

    def __init__(self, id: str, display_name: str | None = None, optional: bool = False, tooltip: str | None = None,
                 lazy: bool | None = None, extra_dict: dict | None = None):
        self.id, self.display_name, self.optional, self.tooltip, self.lazy = id, display_name, optional, tooltip, lazy
        self.extra_dict = extra_dict or {}

    @property
    def io_type(self) -> str:
        return self.Parent.io_type

    def as_dict(self) -> dict:
        return prune_dict({"display_name": self.display_name, "optional": self.optional, "tooltip": self.tooltip,
                           "lazy": self.lazy}) | prune_dict(self.extra_dict)

    def get_io_type(self) -> Any:
        return _StringIOType(self.io_type)


class WidgetInput(Input):
    def __init__(self, id: str, display_name: str | None = None, optional: bool = False, tooltip: str | None = None,
                 lazy: bool | None = None, default: Any = None, socketless: bool | None = None,
                 widget_type: str | None = None, force_input: bool | None = None, extra_dict: dict | None = None):
        super().__init__(id, display_name, optional, tooltip, lazy, extra_dict)
        self.default, self.socketless, self.widget_type, self.force_input = default, socketless, widget_type, force_input

    def as_dict(self) -> dict:
        return super().as_dict() | prune_dict({"default": self.default, "socketless": self.socketless,
                                               "widgetType": self.widget_type, "forceInput": self.force_input})

    def get_io_type(self) -> Any:
        return self.widget_type if self.widget_type is not None else super().get_io_type()


class Output:
    Parent: type | None = None

    def __init__(self, id: str | None = None, display_name: str | None = None, tooltip: str | None = None,
                 is_output_list: bool = False):
        self.id, self.display_name, self.tooltip, self.is_output_list = id, display_name, tooltip, is_output_list

    @property
    def io_type(self) -> Any:
        return self.Parent.io_type

    def as_dict(self) -> dict:
        return prune_dict({"display_name": self.display_name, "tooltip": self.tooltip,
                           "is_output_list": self.is_output_list})

    def get_io_type(self) -> Any:
        return self.io_type


class ComfyTypeI(_ComfyType):
    class Input(Input):
        pass


class ComfyTypeIO(ComfyTypeI):
    class Output(Output):
        pass


def comfytype(io_type: str, **kwargs: Any):
    """Bind `io_type` to a type class and give it its own Input/Output classes (so Parent is per type)."""
    def decorator(cls: type) -> type:
        if not issubclass(cls, _ComfyType):
            cls = type(cls.__name__, (cls, ComfyTypeIO), {k: v for k, v in cls.__dict__.items()
                                                          if k not in ("__dict__", "__weakref__")})
        for name in ("Input", "Output"):
            base = getattr(cls, name, None)
            if base is not None:
                sub = type(base.__name__, (base,), {"__module__": cls.__module__, "__qualname__": f"{cls.__name__}.{name}"})
                sub.Parent = cls
                setattr(cls, name, sub)
        cls.io_type = _StringIOType(io_type)
        return cls
    return decorator


def Custom(io_type: str) -> type:
    """A new socket type named `io_type`."""
    @comfytype(io_type=io_type)
    class CustomComfyType(ComfyTypeIO):
        pass
    return CustomComfyType


@comfytype(io_type="BOOLEAN")
class Boolean(ComfyTypeIO):
    Type = bool

    class Input(WidgetInput):
        def __init__(self, id: str, display_name: str | None = None, optional: bool = False, tooltip: str | None = None,
                     lazy: bool | None = None, default: bool | None = None, label_on: str | None = None,
                     label_off: str | None = None, socketless: bool | None = None, force_input: bool | None = None):
            super().__init__(id, display_name, optional, tooltip, lazy, default, socketless, None, force_input)
            self.label_on, self.label_off = label_on, label_off

        def as_dict(self) -> dict:
            return super().as_dict() | prune_dict({"label_on": self.label_on, "label_off": self.label_off})


@comfytype(io_type="INT")
class Int(ComfyTypeIO):
    Type = int

    class Input(WidgetInput):
        def __init__(self, id: str, display_name: str | None = None, optional: bool = False, tooltip: str | None = None,
                     lazy: bool | None = None, default: int | None = None, min: int | None = None,
                     max: int | None = None, step: int | None = None, control_after_generate: bool | None = None,
                     display_mode: NumberDisplay | None = None, socketless: bool | None = None,
                     force_input: bool | None = None):
            super().__init__(id, display_name, optional, tooltip, lazy, default, socketless, None, force_input)
            self.min, self.max, self.step = min, max, step
            self.control_after_generate, self.display_mode = control_after_generate, display_mode

        def as_dict(self) -> dict:
            return super().as_dict() | prune_dict({
                "min": self.min, "max": self.max, "step": self.step,
                "control_after_generate": self.control_after_generate,
                "display": self.display_mode.value if self.display_mode else None})


@comfytype(io_type="FLOAT")
class Float(ComfyTypeIO):
    Type = float

    class Input(WidgetInput):
        def __init__(self, id: str, display_name: str | None = None, optional: bool = False, tooltip: str | None = None,
                     lazy: bool | None = None, default: float | None = None, min: float | None = None,
                     max: float | None = None, step: float | None = None, round: float | None = None,
                     display_mode: NumberDisplay | None = None, socketless: bool | None = None,
                     force_input: bool | None = None):
            super().__init__(id, display_name, optional, tooltip, lazy, default, socketless, None, force_input)
            self.min, self.max, self.step, self.round, self.display_mode = min, max, step, round, display_mode

        def as_dict(self) -> dict:
            return super().as_dict() | prune_dict({
                "min": self.min, "max": self.max, "step": self.step, "round": self.round,
                "display": self.display_mode.value if isinstance(self.display_mode, Enum) else self.display_mode})


@comfytype(io_type="STRING")
class String(ComfyTypeIO):
    Type = str

    class Input(WidgetInput):
        def __init__(self, id: str, display_name: str | None = None, optional: bool = False, tooltip: str | None = None,
                     lazy: bool | None = None, multiline: bool = False, placeholder: str | None = None,
                     default: str | None = None, dynamic_prompts: bool | None = None, socketless: bool | None = None,
                     force_input: bool | None = None):
            super().__init__(id, display_name, optional, tooltip, lazy, default, socketless, None, force_input)
            self.multiline, self.placeholder, self.dynamic_prompts = multiline, placeholder, dynamic_prompts

        def as_dict(self) -> dict:
            return super().as_dict() | prune_dict({"multiline": self.multiline, "placeholder": self.placeholder,
                                                   "dynamicPrompts": self.dynamic_prompts})


@comfytype(io_type="COMBO")
class Combo(ComfyTypeIO):
    Type = str

    class Input(WidgetInput):
        def __init__(self, id: str, options: list | type[Enum] | None = None, display_name: str | None = None,
                     optional: bool = False, tooltip: str | None = None, lazy: bool | None = None,
                     default: Any = None, control_after_generate: bool | None = None,
                     upload: UploadType | None = None, image_folder: FolderType | None = None,
                     remote: RemoteOptions | None = None, socketless: bool | None = None):
            if isinstance(options, type) and issubclass(options, Enum):
                options = [v.value for v in options]
            if isinstance(default, Enum):
                default = default.value
            super().__init__(id, display_name, optional, tooltip, lazy, default, socketless)
            self.multiselect = False
            self.options, self.control_after_generate = options, control_after_generate
            self.upload, self.image_folder, self.remote = upload, image_folder, remote

        def as_dict(self) -> dict:
            return super().as_dict() | prune_dict({
                "multiselect": self.multiselect, "options": self.options,
                "control_after_generate": self.control_after_generate,
                **({self.upload.value: True} if self.upload is not None else {}),
                "image_folder": self.image_folder.value if self.image_folder else None,
                "remote": self.remote.as_dict() if self.remote else None})

    class Output(Output):
        def __init__(self, id: str | None = None, display_name: str | None = None, options: list | None = None,
                     tooltip: str | None = None, is_output_list: bool = False):
            super().__init__(id, display_name, tooltip, is_output_list)
            self.options = options if options is not None else []

        @property
        def io_type(self) -> Any:
            return self.options


@comfytype(io_type="COMBO")
class MultiCombo(ComfyTypeI):
    Type = list

    class Input(Combo.Input):
        def __init__(self, id: str, options: list, display_name: str | None = None, optional: bool = False,
                     tooltip: str | None = None, lazy: bool | None = None, default: list | None = None,
                     placeholder: str | None = None, chip: bool | None = None,
                     control_after_generate: bool | None = None, socketless: bool | None = None):
            super().__init__(id, options, display_name, optional, tooltip, lazy, default, control_after_generate,
                             socketless=socketless)
            self.multiselect, self.placeholder, self.chip = True, placeholder, chip

        def as_dict(self) -> dict:
            return super().as_dict() | prune_dict({"multi_select": self.multiselect, "placeholder": self.placeholder,
                                                   "chip": self.chip})


def _socket_type(name: str, io_type: str) -> type:
    return comfytype(io_type=io_type)(type(name, (ComfyTypeIO,), {"__module__": __name__}))


# Socket-only types: no widget, just a typed connection.
Image = _socket_type("Image", "IMAGE")
Mask = _socket_type("Mask", "MASK")
Latent = _socket_type("Latent", "LATENT")
Conditioning = _socket_type("Conditioning", "CONDITIONING")
Sampler = _socket_type("Sampler", "SAMPLER")
Sigmas = _socket_type("Sigmas", "SIGMAS")
Noise = _socket_type("Noise", "NOISE")
Guider = _socket_type("Guider", "GUIDER")
Clip = _socket_type("Clip", "CLIP")
ControlNet = _socket_type("ControlNet", "CONTROL_NET")
Vae = _socket_type("Vae", "VAE")
Model = _socket_type("Model", "MODEL")
ClipVision = _socket_type("ClipVision", "CLIP_VISION")
ClipVisionOutput = _socket_type("ClipVisionOutput", "CLIP_VISION_OUTPUT")
StyleModel = _socket_type("StyleModel", "STYLE_MODEL")
Gligen = _socket_type("Gligen", "GLIGEN")
UpscaleModel = _socket_type("UpscaleModel", "UPSCALE_MODEL")
Audio = _socket_type("Audio", "AUDIO")
Video = _socket_type("Video", "VIDEO")
SVG = _socket_type("SVG", "SVG")
LoraModel = _socket_type("LoraModel", "LORA_MODEL")
LossMap = _socket_type("LossMap", "LOSS_MAP")
Voxel = _socket_type("Voxel", "VOXEL")
Mesh = _socket_type("Mesh", "MESH")
Hooks = _socket_type("Hooks", "HOOKS")
HookKeyframes = _socket_type("HookKeyframes", "HOOK_KEYFRAMES")
TimestepsRange = _socket_type("TimestepsRange", "TIMESTEPS_RANGE")
LatentOperation = _socket_type("LatentOperation", "LATENT_OPERATION")
FlowControl = _socket_type("FlowControl", "FLOW_CONTROL")
Accumulation = _socket_type("Accumulation", "ACCUMULATION")
Load3DCamera = _socket_type("Load3DCamera", "LOAD3D_CAMERA")
Load3D = _socket_type("Load3D", "LOAD_3D")
Load3DAnimation = _socket_type("Load3DAnimation", "LOAD_3D_ANIMATION")
Photomaker = _socket_type("Photomaker", "PHOTOMAKER")
Point = _socket_type("Point", "POINT")
FaceAnalysis = _socket_type("FaceAnalysis", "FACE_ANALYSIS")
BBOX = _socket_type("BBOX", "BBOX")
SEGS = _socket_type("SEGS", "SEGS")
AnyType = _socket_type("AnyType", "*")
MODEL_PATCH = _socket_type("MODEL_PATCH", "MODEL_PATCH")
AudioEncoder = _socket_type("AudioEncoder", "AUDIO_ENCODER")
AudioEncoderOutput = _socket_type("AudioEncoderOutput", "AUDIO_ENCODER_OUTPUT")
WanCameraEmbedding = _socket_type("WanCameraEmbedding", "WAN_CAMERA_EMBEDDING")
Webcam = _socket_type("Webcam", "WEBCAM")


class MultiType:
    """An input accepting several types (io type = the comma-joined union)."""
    Type = Any

    class Input(Input):
        def __init__(self, id: str | Input, types: list, display_name: str | None = None, optional: bool = False,
                     tooltip: str | None = None, lazy: bool | None = None, extra_dict: dict | None = None):
            self.input_override = None
            if isinstance(id, Input):
                self.input_override = copy.copy(id)
                optional = optional or id.optional
                tooltip = id.tooltip if id.tooltip is not None else tooltip
                display_name = id.display_name if id.display_name is not None else display_name
                lazy = id.lazy if id.lazy is not None else lazy
                if isinstance(self.input_override, WidgetInput):
                    self.input_override.widget_type = self.input_override.get_io_type()
                id = id.id
            super().__init__(id, display_name, optional, tooltip, lazy, extra_dict)
            self._io_types = types

        def get_io_type(self) -> str:
            names = [t.io_type for t in self._io_types]
            if self.input_override is not None:
                names.insert(0, self.input_override.get_io_type())
            return ",".join(dict.fromkeys(names))

        def as_dict(self) -> dict:
            base = self.input_override.as_dict() if self.input_override is not None else {}
            return base | super().as_dict()


class Hidden(str, Enum):
    unique_id = "UNIQUE_ID"
    prompt = "PROMPT"
    extra_pnginfo = "EXTRA_PNGINFO"
    dynprompt = "DYNPROMPT"
    auth_token_comfy_org = "AUTH_TOKEN_COMFY_ORG"
    api_key_comfy_org = "API_KEY_COMFY_ORG"


class HiddenHolder:
    """`cls.hidden` of a running V3 node; unknown names read as None."""

    def __init__(self, values: dict | None = None):
        for member in Hidden:
            setattr(self, member.name, (values or {}).get(member))

    def __getattr__(self, key: str) -> Any:
        return None

    @classmethod
    def from_dict(cls, d: dict | None) -> "HiddenHolder":
        return cls(d)


@dataclass
class Schema:
    node_id: str
    display_name: str | None = None
    category: str = "sd"
    inputs: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    hidden: list = field(default_factory=list)
    description: str = ""
    is_input_list: bool = False
    is_output_node: bool = False
    is_deprecated: bool = False
    is_experimental: bool = False
    is_api_node: bool = False
    not_idempotent: bool = False
    enable_expand: bool = False

    def validate(self) -> None:
        in_ids = [i.id for i in self.inputs or []]
        out_ids = [o.id for o in self.outputs or []]
        issues = []
        if len(set(in_ids)) != len(in_ids):
            issues.append(f"Input ids must be unique, but {sorted({i for i in in_ids if in_ids.count(i) > 1})} are not.")
        if len(set(out_ids)) != len(out_ids):
            issues.append(f"Output ids must be unique, but {sorted({i for i in out_ids if out_ids.count(i) > 1})} are not.")
        both = set(in_ids) & set(out_ids)
        if both:
            issues.append(f"Ids must be unique between inputs and outputs, but {both} are not.")
        if issues:
            raise ValueError("\n".join(issues))

    def finalize(self) -> "Schema":
        """Add the hidden inputs implied by the flags and default output ids."""
        self.inputs, self.outputs, self.hidden = list(self.inputs or []), list(self.outputs or []), list(self.hidden or [])
        implied = []
        if self.is_api_node:
            implied += [Hidden.auth_token_comfy_org, Hidden.api_key_comfy_org]
        if self.is_output_node:
            implied += [Hidden.prompt, Hidden.extra_pnginfo]
        for h in implied:
            if h not in self.hidden:
                self.hidden.append(h)
        for i, out in enumerate(self.outputs):
            if out.id is None:
                out.id = f"_{i}_{out.io_type}_"
        return self

    def v1_inputs(self) -> dict:
        result: dict = {"required": {}}
        for inp in self.inputs:
            options = inp.as_dict()
            options.pop("optional", None)
            result.setdefault("optional" if inp.optional else "required", {})[inp.id] = (inp.get_io_type(), options)
        for h in self.hidden:
            result.setdefault("hidden", {})[h.name] = (h.value,)
        return result

    def get_v1_info(self, cls: type) -> dict:
        """The /object_info entry (V3 nodes always carry every key)."""
        inputs = self.v1_inputs()
        return {
            "input": inputs,
            "input_order": {key: list(value) for key, value in inputs.items()},
            "output": [o.io_type for o in self.outputs],
            "output_is_list": [o.is_output_list for o in self.outputs],
            "output_name": [o.display_name or o.io_type for o in self.outputs],
            "output_tooltips": [o.tooltip or None for o in self.outputs],
            "name": self.node_id,
            "display_name": self.display_name,
            "description": self.description,
            "python_module": getattr(cls, "RELATIVE_PYTHON_MODULE", None) or "nodes",
            "category": self.category,
            "output_node": self.is_output_node,
            "deprecated": self.is_deprecated,
            "experimental": self.is_experimental,
            "api_node": self.is_api_node,
        }


class classproperty:
    """A read-only property answered by the class (and its instances)."""

    def __init__(self, fget):
        self.fget = fget

    def __get__(self, obj: Any, owner: type) -> Any:
        return self.fget(owner)


class _ComfyNodeInternal:
    """Marker base the engine uses to recognise V3 nodes."""


class _NodeOutputInternal:
    """Marker base for V3 NodeOutput."""


# The engine's names for the two bases above (packs keep ComfyUI's underscored spelling).
ComfyNodeBase = _ComfyNodeInternal
NodeOutputBase = _NodeOutputInternal


def _origin(cls: type) -> type:
    return cls.__dict__.get("_V3_ORIGIN", cls)


_SCHEMA_CACHE: dict[type, Schema] = {}


class ComfyNode(_ComfyNodeInternal):
    """Base of V3 nodes: override `define_schema` and `execute` (classmethods; execute may be async)."""
    RELATIVE_PYTHON_MODULE: str | None = None
    hidden: HiddenHolder | None = None

    @classmethod
    def define_schema(cls) -> Schema:
        raise NotImplementedError

    @classmethod
    def execute(cls, **kwargs: Any) -> "NodeOutput":
        raise NotImplementedError

    @classmethod
    def validate_inputs(cls, **kwargs: Any) -> bool | str:
        raise NotImplementedError

    @classmethod
    def fingerprint_inputs(cls, **kwargs: Any) -> Any:
        raise NotImplementedError

    @classmethod
    def check_lazy_status(cls, **kwargs: Any) -> list[str]:
        return [name for name, value in kwargs.items() if value is None]

    @classmethod
    def GET_BASE_CLASS(cls) -> type:
        return ComfyNode

    @classmethod
    def VALIDATE_CLASS(cls) -> None:
        if first_real_override(cls, "define_schema") is None:
            raise Exception(f"No define_schema function was defined for node class {cls.__name__}.")
        if first_real_override(cls, "execute") is None:
            raise Exception(f"No execute function was defined for node class {cls.__name__}.")

    @classmethod
    def FINALIZE_SCHEMA(cls) -> Schema:
        return cls.define_schema().finalize()

    @classmethod
    def GET_SCHEMA(cls) -> Schema:
        """Validated schema; the first one is remembered for the V1 attribute answers."""
        cls.VALIDATE_CLASS()
        schema = cls.FINALIZE_SCHEMA()
        schema.validate()
        _SCHEMA_CACHE.setdefault(_origin(cls), schema)
        return schema

    @classmethod
    def _schema(cls) -> Schema:
        origin = _origin(cls)
        if origin not in _SCHEMA_CACHE:
            origin.GET_SCHEMA()
        return _SCHEMA_CACHE[origin]

    @classmethod
    def GET_NODE_INFO_V1(cls) -> dict:
        return cls.GET_SCHEMA().get_v1_info(cls)

    @classmethod
    def INPUT_TYPES(cls, include_hidden: bool = True, return_schema: bool = False) -> Any:
        schema = cls.FINALIZE_SCHEMA()
        inputs = schema.v1_inputs()
        if not include_hidden:
            inputs.pop("hidden", None)
        return (inputs, schema) if return_schema else inputs

    @classmethod
    def PREPARE_CLASS_CLONE(cls, hidden_inputs: dict | None) -> type:
        """A throw-away subclass carrying this call's hidden values, so concurrent calls do not share them."""
        origin = _origin(cls)
        return type(origin.__name__, (origin,), {"_V3_ORIGIN": origin, "hidden": HiddenHolder(hidden_inputs),
                                                 "__module__": origin.__module__})

    @classmethod
    def EXECUTE_NORMALIZED(cls, *args: Any, **kwargs: Any) -> "NodeOutput":
        return cls._normalize(cls.execute(*args, **kwargs))

    @classmethod
    async def EXECUTE_NORMALIZED_ASYNC(cls, *args: Any, **kwargs: Any) -> "NodeOutput":
        return cls._normalize(await cls.execute(*args, **kwargs))

    @classmethod
    def _normalize(cls, value: Any) -> "NodeOutput":
        from comfy_bridge.execution.graph_utils import ExecutionBlocker
        if value is None:
            value = NodeOutput()
        elif isinstance(value, tuple):
            value = NodeOutput(*value)
        elif isinstance(value, dict):
            value = NodeOutput.from_dict(value)
        elif isinstance(value, ExecutionBlocker):
            value = NodeOutput(block_execution=value.message)
        elif not isinstance(value, NodeOutput):
            raise Exception(f"Invalid return type from node: {type(value)}")
        if value.expand is not None and not cls._schema().enable_expand:
            raise Exception(f"Node {cls.__name__} is not expandable, but expand included in NodeOutput; "
                            "developer should set enable_expand=True on node's Schema to allow this.")
        return value

    # --- V1 attribute answers -------------------------------------------------------------
    @classproperty
    def FUNCTION(cls) -> str:
        return "EXECUTE_NORMALIZED_ASYNC" if inspect.iscoroutinefunction(cls.execute) else "EXECUTE_NORMALIZED"

    @classproperty
    def RETURN_TYPES(cls) -> list:
        return [o.io_type for o in cls._schema().outputs]

    @classproperty
    def RETURN_NAMES(cls) -> list:
        return [o.display_name or o.io_type for o in cls._schema().outputs]

    @classproperty
    def OUTPUT_IS_LIST(cls) -> list:
        return [o.is_output_list for o in cls._schema().outputs]

    @classproperty
    def OUTPUT_TOOLTIPS(cls) -> list:
        return [o.tooltip or None for o in cls._schema().outputs]

    @classproperty
    def OUTPUT_NODE(cls) -> bool:
        return cls._schema().is_output_node

    @classproperty
    def INPUT_IS_LIST(cls) -> bool:
        return cls._schema().is_input_list

    @classproperty
    def NOT_IDEMPOTENT(cls) -> bool:
        return cls._schema().not_idempotent

    @classproperty
    def CATEGORY(cls) -> str:
        return cls._schema().category

    @classproperty
    def DESCRIPTION(cls) -> str:
        return cls._schema().description

    @classproperty
    def DEPRECATED(cls) -> bool:
        return cls._schema().is_deprecated

    @classproperty
    def EXPERIMENTAL(cls) -> bool:
        return cls._schema().is_experimental

    @classproperty
    def API_NODE(cls) -> bool:
        return cls._schema().is_api_node


def first_real_override(cls: type, name: str, base: type | None = None) -> Any:
    """`cls.<name>` if some class below the V3 base overrides it, else None (the base's stubs don't count)."""
    base = base or ComfyNode
    if not isinstance(cls, type) or not issubclass(cls, base):
        return getattr(cls, name, None)
    for klass in cls.__mro__:
        if klass is base:
            return None
        if name in klass.__dict__:
            return getattr(cls, name)
    return None


class NodeOutput(_NodeOutputInternal):
    """What a V3 `execute` returns: output values, optional ui, expansion graph or a block message."""

    def __init__(self, *args: Any, ui: Any = None, expand: dict | None = None, block_execution: str | None = None):
        self.args, self.ui, self.expand, self.block_execution = args, ui, expand, block_execution

    @property
    def result(self) -> tuple | None:
        return self.args if len(self.args) > 0 else None

    @classmethod
    def from_dict(cls, data: dict) -> "NodeOutput":
        from comfy_bridge.execution.graph_utils import ExecutionBlocker
        result = data.get("result", ())
        if isinstance(result, ExecutionBlocker):
            return cls(block_execution=result.message)
        return cls(*(result or ()), ui=data.get("ui"), expand=data.get("expand"))

    def __getitem__(self, index: int) -> Any:
        return self.args[index]


class _UIOutput:
    def as_dict(self) -> dict:
        raise NotImplementedError


class ComfyExtension:
    """What a V3 pack's `comfy_entrypoint()` returns."""

    async def on_load(self) -> None:
        pass

    async def get_node_list(self) -> list[type[ComfyNode]]:
        raise NotImplementedError
