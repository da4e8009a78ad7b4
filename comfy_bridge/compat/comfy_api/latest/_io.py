"""The V3 node API (`comfy_api.latest.io`): schemas, typed inputs/outputs and the `ComfyNode` base.

A V3 node class also answers the V1 attribute names (INPUT_TYPES, RETURN_TYPES, FUNCTION, ...) so the
engine and the registry treat both generations alike.
"""

from __future__ import annotations

import copy
import inspect
from collections import Counter
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any, Literal

from nodes.library.svg import SVG as SVGValue


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
    gradient_slider = "gradientslider"


class ControlAfterGenerate(str, Enum):
    fixed = "fixed"
    increment = "increment"
    decrement = "decrement"
    randomize = "randomize"


def prune_dict(d: dict) -> dict:
    """Drop None values: /object_info omits options that were not given."""
    return {k: v for k, v in d.items() if v is not None}


class RemoteOptions:
    def __init__(
        self,
        route: str,
        refresh_button: bool,
        control_after_refresh: Literal["first", "last"] = "first",
        timeout: int | None = None,
        max_retries: int | None = None,
        refresh: int | None = None,
    ):
        self.route, self.refresh_button, self.control_after_refresh = route, refresh_button, control_after_refresh
        self.timeout, self.max_retries, self.refresh = timeout, max_retries, refresh

    def as_dict(self) -> dict:
        return prune_dict(
            {
                "route": self.route,
                "refresh_button": self.refresh_button,
                "control_after_refresh": self.control_after_refresh,
                "timeout": self.timeout,
                "max_retries": self.max_retries,
                "refresh": self.refresh,
            }
        )


class RemoteItemSchema:
    """How a rich remote combo maps each fetched object to a dropdown item (dot-path field names)."""

    def __init__(
        self,
        value_field: str,
        label_field: str,
        preview_url_field: str | None = None,
        preview_type: Literal["image", "video", "audio"] = "image",
        description_field: str | None = None,
        search_fields: list[str] | None = None,
    ):
        if preview_type not in ("image", "video", "audio"):
            raise ValueError(
                f"RemoteItemSchema: 'preview_type' must be 'image', 'video', or 'audio'; got {preview_type!r}."
            )
        for name in search_fields or []:
            if "{" in name or "}" in name:
                raise ValueError(
                    f"RemoteItemSchema: 'search_fields' must be dot-paths, not template strings (got {name!r})."
                )
        self.value_field, self.label_field, self.preview_url_field = value_field, label_field, preview_url_field
        self.preview_type, self.description_field, self.search_fields = preview_type, description_field, search_fields

    def as_dict(self) -> dict:
        return prune_dict(
            {
                "value_field": self.value_field,
                "label_field": self.label_field,
                "preview_url_field": self.preview_url_field,
                "preview_type": self.preview_type,
                "description_field": self.description_field,
                "search_fields": self.search_fields,
            }
        )


class RemoteComboOptions:
    """A rich remote combo (previews, search); given to Combo.Input as `remote_combo=`."""

    def __init__(
        self,
        route: str,
        item_schema: RemoteItemSchema,
        refresh_button: bool = True,
        auto_select: Literal["first", "last"] | None = None,
        timeout: int | None = None,
        max_retries: int | None = None,
        refresh: int | None = None,
        response_key: str | None = None,
    ):
        if auto_select is not None and auto_select not in ("first", "last"):
            raise ValueError(
                f"RemoteComboOptions: 'auto_select' must be 'first', 'last', or None; got {auto_select!r}."
            )
        if refresh is not None and 0 < refresh < 128:
            raise ValueError(
                f"RemoteComboOptions: 'refresh' must be >= 128 (ms TTL) or <= 0 (cache never expires); got {refresh}."
            )
        if timeout is not None and timeout < 0:
            raise ValueError(f"RemoteComboOptions: 'timeout' must be >= 0 (got {timeout}).")
        if max_retries is not None and max_retries < 0:
            raise ValueError(f"RemoteComboOptions: 'max_retries' must be >= 0 (got {max_retries}).")
        if not route.startswith("/"):
            raise ValueError(f"RemoteComboOptions: 'route' must be a relative path starting with '/'; got {route!r}.")
        self.route, self.item_schema, self.refresh_button, self.auto_select = (
            route,
            item_schema,
            refresh_button,
            auto_select,
        )
        self.timeout, self.max_retries, self.refresh, self.response_key = timeout, max_retries, refresh, response_key

    def as_dict(self) -> dict:
        return prune_dict(
            {
                "route": self.route,
                "item_schema": self.item_schema.as_dict(),
                "refresh_button": self.refresh_button,
                "auto_select": self.auto_select,
                "timeout": self.timeout,
                "max_retries": self.max_retries,
                "refresh": self.refresh,
                "response_key": self.response_key,
            }
        )


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

    def __init__(
        self,
        id: str,
        display_name: str | None = None,
        optional: bool = False,
        tooltip: str | None = None,
        lazy: bool | None = None,
        extra_dict: dict | None = None,
        raw_link: bool | None = None,
        advanced: bool | None = None,
    ):
        self.id, self.display_name, self.optional, self.tooltip, self.lazy = id, display_name, optional, tooltip, lazy
        self.extra_dict = extra_dict if extra_dict is not None else {}
        self.rawLink, self.advanced = raw_link, advanced

    @property
    def io_type(self) -> str:
        return self.Parent.io_type

    @property
    def Type(self) -> Any:
        return self.Parent.Type

    def as_dict(self) -> dict:
        return prune_dict(
            {
                "display_name": self.display_name,
                "optional": self.optional,
                "tooltip": self.tooltip,
                "lazy": self.lazy,
                "rawLink": self.rawLink,
                "advanced": self.advanced,
            }
        ) | prune_dict(self.extra_dict)

    def get_io_type(self) -> Any:
        return _StringIOType(self.io_type)

    def get_all(self) -> list[Input]:
        """This input and those nested in it (dynamic inputs carry more)."""
        return [self]

    def validate(self) -> None:
        pass


class WidgetInput(Input):
    def __init__(
        self,
        id: str,
        display_name: str | None = None,
        optional: bool = False,
        tooltip: str | None = None,
        lazy: bool | None = None,
        default: Any = None,
        socketless: bool | None = None,
        widget_type: str | None = None,
        force_input: bool | None = None,
        extra_dict: dict | None = None,
        raw_link: bool | None = None,
        advanced: bool | None = None,
    ):
        super().__init__(id, display_name, optional, tooltip, lazy, extra_dict, raw_link, advanced)
        self.default, self.socketless, self.widget_type, self.force_input = (
            default,
            socketless,
            widget_type,
            force_input,
        )

    def as_dict(self) -> dict:
        return super().as_dict() | prune_dict(
            {
                "default": self.default,
                "socketless": self.socketless,
                "widgetType": self.widget_type,
                "forceInput": self.force_input,
            }
        )

    def get_io_type(self) -> Any:
        return self.widget_type if self.widget_type is not None else super().get_io_type()


class Output:
    Parent: type | None = None

    def __init__(
        self,
        id: str | None = None,
        display_name: str | None = None,
        tooltip: str | None = None,
        is_output_list: bool = False,
    ):
        # An output named only by its id shows that id (ComfyUI since 0.4: output_name falls back to it).
        self.id, self.display_name, self.tooltip, self.is_output_list = id, display_name or id, tooltip, is_output_list

    @property
    def io_type(self) -> Any:
        return self.Parent.io_type

    @property
    def Type(self) -> Any:
        return self.Parent.Type

    def as_dict(self) -> dict:
        return prune_dict(
            {
                "display_name": self.display_name or self.id,
                "tooltip": self.tooltip,
                "is_output_list": self.is_output_list,
            }
        )

    def get_io_type(self) -> Any:
        return self.io_type

    def validate(self) -> None:
        pass


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
            cls = type(
                cls.__name__,
                (cls, ComfyTypeIO),
                {k: v for k, v in cls.__dict__.items() if k not in ("__dict__", "__weakref__")},
            )
        for name in ("Input", "Output"):
            base = getattr(cls, name, None)
            if base is not None:
                sub = type(
                    base.__name__, (base,), {"__module__": cls.__module__, "__qualname__": f"{cls.__name__}.{name}"}
                )
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
        def __init__(
            self,
            id: str,
            display_name: str | None = None,
            optional: bool = False,
            tooltip: str | None = None,
            lazy: bool | None = None,
            default: bool | None = None,
            label_on: str | None = None,
            label_off: str | None = None,
            socketless: bool | None = None,
            force_input: bool | None = None,
            extra_dict: dict | None = None,
            raw_link: bool | None = None,
            advanced: bool | None = None,
        ):
            super().__init__(
                id,
                display_name,
                optional,
                tooltip,
                lazy,
                default,
                socketless,
                None,
                force_input,
                extra_dict,
                raw_link,
                advanced,
            )
            self.label_on, self.label_off = label_on, label_off

        def as_dict(self) -> dict:
            return super().as_dict() | prune_dict({"label_on": self.label_on, "label_off": self.label_off})


@comfytype(io_type="INT")
class Int(ComfyTypeIO):
    Type = int

    class Input(WidgetInput):
        def __init__(
            self,
            id: str,
            display_name: str | None = None,
            optional: bool = False,
            tooltip: str | None = None,
            lazy: bool | None = None,
            default: int | None = None,
            min: int | None = None,
            max: int | None = None,
            step: int | None = None,
            control_after_generate: bool | ControlAfterGenerate | None = None,
            display_mode: NumberDisplay | None = None,
            socketless: bool | None = None,
            force_input: bool | None = None,
            extra_dict: dict | None = None,
            raw_link: bool | None = None,
            advanced: bool | None = None,
        ):
            super().__init__(
                id,
                display_name,
                optional,
                tooltip,
                lazy,
                default,
                socketless,
                None,
                force_input,
                extra_dict,
                raw_link,
                advanced,
            )
            self.min, self.max, self.step = min, max, step
            self.control_after_generate, self.display_mode = control_after_generate, display_mode

        def as_dict(self) -> dict:
            return super().as_dict() | prune_dict(
                {
                    "min": self.min,
                    "max": self.max,
                    "step": self.step,
                    "control_after_generate": self.control_after_generate,
                    "display": self.display_mode.value if isinstance(self.display_mode, Enum) else self.display_mode,
                }
            )


@comfytype(io_type="FLOAT")
class Float(ComfyTypeIO):
    Type = float

    class Input(WidgetInput):
        def __init__(
            self,
            id: str,
            display_name: str | None = None,
            optional: bool = False,
            tooltip: str | None = None,
            lazy: bool | None = None,
            default: float | None = None,
            min: float | None = None,
            max: float | None = None,
            step: float | None = None,
            round: float | None = None,
            display_mode: NumberDisplay | None = None,
            gradient_stops: list[dict] | None = None,
            socketless: bool | None = None,
            force_input: bool | None = None,
            extra_dict: dict | None = None,
            raw_link: bool | None = None,
            advanced: bool | None = None,
        ):
            super().__init__(
                id,
                display_name,
                optional,
                tooltip,
                lazy,
                default,
                socketless,
                None,
                force_input,
                extra_dict,
                raw_link,
                advanced,
            )
            self.min, self.max, self.step, self.round, self.display_mode = min, max, step, round, display_mode
            self.gradient_stops = gradient_stops

        def as_dict(self) -> dict:
            return super().as_dict() | prune_dict(
                {
                    "min": self.min,
                    "max": self.max,
                    "step": self.step,
                    "round": self.round,
                    "display": self.display_mode.value if isinstance(self.display_mode, Enum) else self.display_mode,
                    "gradient_stops": self.gradient_stops,
                }
            )


@comfytype(io_type="STRING")
class String(ComfyTypeIO):
    Type = str

    class Input(WidgetInput):
        def __init__(
            self,
            id: str,
            display_name: str | None = None,
            optional: bool = False,
            tooltip: str | None = None,
            lazy: bool | None = None,
            multiline: bool = False,
            placeholder: str | None = None,
            default: str | None = None,
            dynamic_prompts: bool | None = None,
            socketless: bool | None = None,
            force_input: bool | None = None,
            extra_dict: dict | None = None,
            raw_link: bool | None = None,
            advanced: bool | None = None,
        ):
            super().__init__(
                id,
                display_name,
                optional,
                tooltip,
                lazy,
                default,
                socketless,
                None,
                force_input,
                extra_dict,
                raw_link,
                advanced,
            )
            self.multiline, self.placeholder, self.dynamic_prompts = multiline, placeholder, dynamic_prompts

        def as_dict(self) -> dict:
            return super().as_dict() | prune_dict(
                {"multiline": self.multiline, "placeholder": self.placeholder, "dynamicPrompts": self.dynamic_prompts}
            )


@comfytype(io_type="COMBO")
class Combo(ComfyTypeIO):
    Type = str

    class Input(WidgetInput):
        def __init__(
            self,
            id: str,
            options: list | type[Enum] | None = None,
            display_name: str | None = None,
            optional: bool = False,
            tooltip: str | None = None,
            lazy: bool | None = None,
            default: Any = None,
            control_after_generate: bool | ControlAfterGenerate | None = None,
            upload: UploadType | None = None,
            image_folder: FolderType | None = None,
            remote: RemoteOptions | None = None,
            remote_combo: RemoteComboOptions | None = None,
            socketless: bool | None = None,
            extra_dict: dict | None = None,
            raw_link: bool | None = None,
            advanced: bool | None = None,
        ):
            if remote is not None and remote_combo is not None:
                raise ValueError("Combo.Input: pass either 'remote' or 'remote_combo', not both.")
            if options is not None and remote_combo is not None:
                raise ValueError("Combo.Input: pass either 'options' or 'remote_combo', not both.")
            if isinstance(options, type) and issubclass(options, Enum):
                options = [v.value for v in options]
            if isinstance(default, Enum):
                default = default.value
            super().__init__(
                id,
                display_name,
                optional,
                tooltip,
                lazy,
                default,
                socketless,
                None,
                None,
                extra_dict,
                raw_link,
                advanced,
            )
            self.multiselect = False
            self.options, self.control_after_generate = options, control_after_generate
            self.upload, self.image_folder, self.remote, self.remote_combo = upload, image_folder, remote, remote_combo

        def as_dict(self) -> dict:
            return super().as_dict() | prune_dict(
                {
                    "multiselect": self.multiselect,
                    "options": self.options,
                    "control_after_generate": self.control_after_generate,
                    **({self.upload.value: True} if self.upload is not None else {}),
                    "image_folder": self.image_folder.value if self.image_folder else None,
                    "remote": self.remote.as_dict() if self.remote else None,
                    "remote_combo": self.remote_combo.as_dict() if self.remote_combo else None,
                }
            )

    class Output(Output):
        def __init__(
            self,
            id: str | None = None,
            display_name: str | None = None,
            options: list | None = None,
            tooltip: str | None = None,
            is_output_list: bool = False,
        ):
            super().__init__(id, display_name, tooltip, is_output_list)
            self.options = options if options is not None else []

        @property
        def io_type(self) -> Any:
            return self.options


@comfytype(io_type="COMBO")
class MultiCombo(ComfyTypeI):
    Type = list

    class Input(Combo.Input):
        def __init__(
            self,
            id: str,
            options: list,
            display_name: str | None = None,
            optional: bool = False,
            tooltip: str | None = None,
            lazy: bool | None = None,
            default: list | None = None,
            placeholder: str | None = None,
            chip: bool | None = None,
            control_after_generate: bool | ControlAfterGenerate | None = None,
            socketless: bool | None = None,
            extra_dict: dict | None = None,
            raw_link: bool | None = None,
            advanced: bool | None = None,
        ):
            super().__init__(
                id,
                options,
                display_name,
                optional,
                tooltip,
                lazy,
                default,
                control_after_generate,
                socketless=socketless,
                extra_dict=extra_dict,
                raw_link=raw_link,
                advanced=advanced,
            )
            self.multiselect, self.placeholder, self.chip = True, placeholder, chip

        def as_dict(self) -> dict:
            # The frontend reads `multi_select` as an object of its options; `multiselect` stays for older ones.
            return super().as_dict() | prune_dict(
                {"multi_select": prune_dict({"placeholder": self.placeholder, "chip": self.chip})}
            )


def _socket_type(name: str, io_type: str, type_hint: Any = Any) -> type:
    return comfytype(io_type=io_type)(type(name, (ComfyTypeIO,), {"__module__": __name__, "Type": type_hint}))


# Socket-only types: no widget, just a typed connection.
Image = _socket_type("Image", "IMAGE")
Mask = _socket_type("Mask", "MASK")
Latent = _socket_type("Latent", "LATENT", dict)
Conditioning = _socket_type("Conditioning", "CONDITIONING", list)
Sampler = _socket_type("Sampler", "SAMPLER")
Sigmas = _socket_type("Sigmas", "SIGMAS")
Noise = _socket_type("Noise", "NOISE")
Guider = _socket_type("Guider", "GUIDER")
Clip = _socket_type("Clip", "CLIP")
ControlNet = _socket_type("ControlNet", "CONTROL_NET")
Vae = _socket_type("Vae", "VAE")
Model = _socket_type("Model", "MODEL")
BackgroundRemoval = _socket_type("BackgroundRemoval", "BACKGROUND_REMOVAL")
ClipVision = _socket_type("ClipVision", "CLIP_VISION")
ClipVisionOutput = _socket_type("ClipVisionOutput", "CLIP_VISION_OUTPUT")
StyleModel = _socket_type("StyleModel", "STYLE_MODEL")
Gligen = _socket_type("Gligen", "GLIGEN")
UpscaleModel = _socket_type("UpscaleModel", "UPSCALE_MODEL")
LatentUpscaleModel = _socket_type("LatentUpscaleModel", "LATENT_UPSCALE_MODEL")
Audio = _socket_type("Audio", "AUDIO", dict)
Video = _socket_type("Video", "VIDEO")
SVG = _socket_type("SVG", "SVG", SVGValue)
LoraModel = _socket_type("LoraModel", "LORA_MODEL", dict)
LossMap = _socket_type("LossMap", "LOSS_MAP", dict)
Voxel = _socket_type("Voxel", "VOXEL")
Mesh = _socket_type("Mesh", "MESH")
Splat = _socket_type("Splat", "SPLAT")
File3DAny = _socket_type("File3DAny", "FILE_3D")
File3DGLB = _socket_type("File3DGLB", "FILE_3D_GLB")
File3DGLTF = _socket_type("File3DGLTF", "FILE_3D_GLTF")
File3DFBX = _socket_type("File3DFBX", "FILE_3D_FBX")
File3DOBJ = _socket_type("File3DOBJ", "FILE_3D_OBJ")
File3DSTL = _socket_type("File3DSTL", "FILE_3D_STL")
File3DUSDZ = _socket_type("File3DUSDZ", "FILE_3D_USDZ")
File3DPLY = _socket_type("File3DPLY", "FILE_3D_PLY")
File3DSPLAT = _socket_type("File3DSPLAT", "FILE_3D_SPLAT")
File3DSPZ = _socket_type("File3DSPZ", "FILE_3D_SPZ")
File3DKSPLAT = _socket_type("File3DKSPLAT", "FILE_3D_KSPLAT")
File3DSplatAny = _socket_type("File3DSplatAny", "FILE_3D_SPLAT_ANY")
File3DPointCloudAny = _socket_type("File3DPointCloudAny", "FILE_3D_POINT_CLOUD_ANY")
Hooks = _socket_type("Hooks", "HOOKS")
HookKeyframes = _socket_type("HookKeyframes", "HOOK_KEYFRAMES")
TimestepsRange = _socket_type("TimestepsRange", "TIMESTEPS_RANGE", tuple)
LatentOperation = _socket_type("LatentOperation", "LATENT_OPERATION")
FlowControl = _socket_type("FlowControl", "FLOW_CONTROL", tuple)
Accumulation = _socket_type("Accumulation", "ACCUMULATION", dict)
Load3DCamera = _socket_type("Load3DCamera", "LOAD3D_CAMERA", dict)
Load3DModelInfo = _socket_type("Load3DModelInfo", "LOAD3D_MODEL_INFO", list)
Load3D = _socket_type("Load3D", "LOAD_3D", dict)
Load3DAnimation = _socket_type("Load3DAnimation", "LOAD_3D_ANIMATION", dict)
Layers = _socket_type("Layers", "LAYERS", dict)
Photomaker = _socket_type("Photomaker", "PHOTOMAKER")
Point = _socket_type("Point", "POINT")
FaceAnalysis = _socket_type("FaceAnalysis", "FACE_ANALYSIS")
BBOX = _socket_type("BBOX", "BBOX")
SEGS = _socket_type("SEGS", "SEGS")
AnyType = _socket_type("AnyType", "*")
ModelPatch = _socket_type("ModelPatch", "MODEL_PATCH")
MODEL_PATCH = ModelPatch  # the name before ComfyUI 0.4
AudioEncoder = _socket_type("AudioEncoder", "AUDIO_ENCODER")
AudioEncoderOutput = _socket_type("AudioEncoderOutput", "AUDIO_ENCODER_OUTPUT")
WanCameraEmbedding = _socket_type("WanCameraEmbedding", "WAN_CAMERA_EMBEDDING")
Tracks = _socket_type("Tracks", "TRACKS", dict)
Dict = _socket_type("Dict", "DICT", dict)
Array = _socket_type("Array", "ARRAY", list)
Histogram = _socket_type("Histogram", "HISTOGRAM", list)


def _widget_type(
    name: str,
    io_type: str,
    type_hint: Any,
    default: Any = None,
    optional: bool = False,
    inputs_only: bool = False,
    options: tuple[str, ...] = (),
) -> type:
    """A type whose input is a frontend widget without a socket by default (socketless=True).

    `default` is the value used when none is given (a callable makes a fresh one); `options` names extra
    keyword options that go into /object_info as given.
    """

    def __init__(
        self,
        id: str,
        display_name: str | None = None,
        optional: bool = optional,
        tooltip: str | None = None,
        socketless: bool = True,
        default: Any = None,
        advanced: bool | None = None,
        **kwargs: Any,
    ) -> None:
        unknown = set(kwargs) - set(options)
        if unknown:
            raise TypeError(f"{name}.Input got unexpected keyword arguments {sorted(unknown)}")
        if default is None and default_value is not None:
            default = default_value() if callable(default_value) else default_value
        WidgetInput.__init__(
            self, id, display_name, optional, tooltip, None, default, socketless, None, None, None, None, advanced
        )
        self.options_given = kwargs

    def as_dict(self) -> dict:
        return WidgetInput.as_dict(self) | prune_dict(self.options_given)

    default_value = default
    widget_input = type("Input", (WidgetInput,), {"__init__": __init__, "as_dict": as_dict})
    base = ComfyTypeI if inputs_only else ComfyTypeIO
    return comfytype(io_type=io_type)(
        type(name, (base,), {"__module__": __name__, "Type": type_hint, "Input": widget_input})
    )


ImageCompare = _widget_type("ImageCompare", "IMAGECOMPARE", dict, inputs_only=True)
Color = _widget_type("Color", "COLOR", str, default="#ffffff")
Colors = _widget_type("Colors", "COLORS", list, default=list)
BoundingBoxes = _widget_type("BoundingBoxes", "BOUNDING_BOXES", list, default=list)
Compositor = _widget_type("Compositor", "COMPOSITOR", dict, default=dict)
CameraInfoState = _widget_type("CameraInfoState", "CAMERA_INFO_STATE", dict, inputs_only=True)
ResolutionPreview = _widget_type(
    "ResolutionPreview",
    "RESOLUTION_PREVIEW",
    dict,
    optional=True,
    options=("ratio_widget", "megapixels_widget", "multiple_widget"),
)
Range = _widget_type(
    "Range",
    "RANGE",
    dict,
    default=lambda: {"min": 0.0, "max": 1.0},
    options=("display", "gradient_stops", "show_midpoint", "midpoint_scale", "value_min", "value_max"),
)


@comfytype(io_type="WEBCAM")
class Webcam(ComfyTypeIO):
    Type = str

    class Input(WidgetInput):
        def __init__(
            self,
            id: str,
            display_name: str | None = None,
            optional: bool = False,
            tooltip: str | None = None,
            lazy: bool | None = None,
            default: str | None = None,
            socketless: bool | None = None,
            extra_dict: dict | None = None,
            raw_link: bool | None = None,
            advanced: bool | None = None,
        ):
            super().__init__(
                id,
                display_name,
                optional,
                tooltip,
                lazy,
                default,
                socketless,
                None,
                None,
                extra_dict,
                raw_link,
                advanced,
            )


@comfytype(io_type="BOUNDING_BOX")
class BoundingBox(ComfyTypeIO):
    Type = dict  # {"x", "y", "width", "height"}

    class Input(WidgetInput):
        def __init__(
            self,
            id: str,
            display_name: str | None = None,
            optional: bool = False,
            tooltip: str | None = None,
            socketless: bool = True,
            default: dict | None = None,
            component: str | None = None,
            force_input: bool | None = None,
        ):
            super().__init__(
                id,
                display_name,
                optional,
                tooltip,
                None,
                default if default is not None else {"x": 0, "y": 0, "width": 512, "height": 512},
                socketless,
                None,
                force_input,
            )
            self.component = component

        def as_dict(self) -> dict:
            return super().as_dict() | prune_dict({"component": self.component or None})


@comfytype(io_type="CURVE")
class Curve(ComfyTypeIO):
    Type = list

    class Input(WidgetInput):
        def __init__(
            self,
            id: str,
            display_name: str | None = None,
            optional: bool = False,
            tooltip: str | None = None,
            socketless: bool = True,
            default: list | None = None,
            advanced: bool | None = None,
        ):
            super().__init__(
                id,
                display_name,
                optional,
                tooltip,
                None,
                default if default is not None else [(0.0, 0.0), (1.0, 1.0)],
                socketless,
                None,
                None,
                None,
                None,
                advanced,
            )

        def as_dict(self) -> dict:
            # The curve widget takes its points with the interpolation it draws them with.
            return super().as_dict() | {
                "default": {"points": [list(p) for p in self.default], "interpolation": "monotone_cubic"}
            }


@comfytype(io_type="VIDEO_EDIT")
class VideoEdit(ComfyTypeIO):
    Type = dict

    class Input(WidgetInput):
        def __init__(
            self,
            id: str,
            display_name: str | None = None,
            optional: bool = False,
            tooltip: str | None = None,
            socketless: bool = True,
            default: dict | None = None,
            features: list[str] | None = None,
            advanced: bool | None = None,
        ):
            self.features = features if features is not None else ["trim", "crop"]
            if default is None:
                default = {}
                if "trim" in self.features:
                    default["trim"] = {"start_time": 0.0, "duration": 0.0}
                if "crop" in self.features:
                    default["crop"] = {"x": 0, "y": 0, "width": 0, "height": 0}
            super().__init__(
                id, display_name, optional, tooltip, None, default, socketless, None, None, None, None, advanced
            )

        def as_dict(self) -> dict:
            return super().as_dict() | prune_dict({"features": self.features})


@comfytype(io_type="COMFY_MULTITYPED_V3")
class MultiType:
    """An input accepting several types (its io type is the comma-joined union, first the overridden input's)."""

    Type = Any

    class Input(Input):
        def __init__(
            self,
            id: str | Input,
            types: list,
            display_name: str | None = None,
            optional: bool = False,
            tooltip: str | None = None,
            lazy: bool | None = None,
            extra_dict: dict | None = None,
            raw_link: bool | None = None,
            advanced: bool | None = None,
        ):
            self.input_override = None
            if isinstance(id, Input):
                # An input given as `id` becomes the widget (if any), its own options winning over ours.
                self.input_override = copy.copy(id)
                optional = True if id.optional is True else optional
                tooltip = id.tooltip if id.tooltip is not None else tooltip
                display_name = id.display_name if id.display_name is not None else display_name
                lazy = id.lazy if id.lazy is not None else lazy
                if isinstance(self.input_override, WidgetInput):
                    self.input_override.widget_type = self.input_override.get_io_type()
                id = id.id
            super().__init__(id, display_name, optional, tooltip, lazy, extra_dict, raw_link, advanced)
            self._io_types = types

        @property
        def io_types(self) -> list[type]:
            return [t if isinstance(t, type) else type(t) for t in self._io_types]

        def get_io_type(self) -> str:
            names = [t.io_type for t in self.io_types]
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
    comfy_usage_source = "COMFY_USAGE_SOURCE"


class HiddenHolder:
    """`cls.hidden` of a running V3 node; unknown names read as None."""

    def __init__(self, values: dict | None = None):
        for member in Hidden:
            setattr(self, member.name, (values or {}).get(member))

    def __getattr__(self, key: str) -> Any:
        return None

    @classmethod
    def from_dict(cls, d: dict | None) -> HiddenHolder:
        return cls(d)

    @classmethod
    def from_v3_data(cls, v3_data: dict | None) -> HiddenHolder:
        return cls((v3_data or {}).get("hidden_inputs"))


@dataclass
class NodeInfoV1:
    """A V3 node's /object_info entry, in ComfyUI's key order (every key present, unset ones null)."""

    input: dict | None = None
    input_order: dict | None = None
    is_input_list: bool | None = None
    output: list | None = None
    output_is_list: list | None = None
    output_name: list | None = None
    output_tooltips: list | None = None
    output_matchtypes: list | None = None
    name: str | None = None
    display_name: str | None = None
    description: str | None = None
    python_module: Any = None
    category: str | None = None
    output_node: bool | None = None
    deprecated: bool | None = None
    experimental: bool | None = None
    dev_only: bool | None = None
    api_node: bool | None = None
    price_badge: dict | None = None
    search_aliases: list | None = None
    essentials_category: str | None = None
    has_intermediate_output: bool | None = None


def _is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(x, str) for x in value)


@dataclass
class PriceBadgeDepends:
    """What a price badge's expression reads: widgets (by input id), inputs and input groups."""

    widgets: list = field(default_factory=list)
    inputs: list = field(default_factory=list)
    input_groups: list = field(default_factory=list)

    def validate(self) -> None:
        for name in ("widgets", "inputs", "input_groups"):
            if not _is_str_list(getattr(self, name)):
                raise ValueError(f"PriceBadgeDepends.{name} must be a list[str].")

    def as_dict(self, schema_inputs: list) -> dict:
        types: dict[str, Any] = {}

        def collect(inputs: list, prefix: str = "") -> None:
            for inp in inputs:
                types[prefix + inp.id] = inp.get_io_type()
                collect(inp.get_all()[1:], prefix + inp.id + ".")

        collect(schema_inputs)
        widgets = []
        for name in self.widgets:
            if name not in types:
                raise ValueError(
                    f"PriceBadge depends_on.widgets references unknown widget '{name}'. "
                    f"Available widgets: {list(types)}"
                )
            widgets.append({"name": name, "type": types[name]})
        return {"widgets": widgets, "inputs": self.inputs, "input_groups": self.input_groups}


@dataclass
class PriceBadge:
    """A price the frontend computes from widget values with a JSONata expression."""

    expr: str
    depends_on: PriceBadgeDepends = field(default_factory=PriceBadgeDepends)
    engine: str = "jsonata"

    def validate(self) -> None:
        if self.engine != "jsonata":
            raise ValueError(f"Unsupported PriceBadge.engine '{self.engine}'. Only 'jsonata' is supported.")
        if not isinstance(self.expr, str) or not self.expr.strip():
            raise ValueError("PriceBadge.expr must be a non-empty string.")
        self.depends_on.validate()

    def as_dict(self, schema_inputs: list) -> dict:
        return {"engine": self.engine, "depends_on": self.depends_on.as_dict(schema_inputs), "expr": self.expr}


def add_to_dict_v1(i: Input, d: dict) -> None:
    """Put one input into a V1 INPUT_TYPES dict (its `optional` flag picks the section)."""
    options = i.as_dict()
    options.pop("optional", None)
    d.setdefault("optional" if i.optional else "required", {})[i.id] = (i.get_io_type(), options)


def create_input_dict_v1(inputs: list) -> dict:
    d: dict = {"required": {}}
    for i in inputs:
        add_to_dict_v1(i, d)
    return d


@dataclass
class Schema:
    node_id: str
    display_name: str | None = None
    category: str = "sd"
    inputs: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    hidden: list = field(default_factory=list)
    description: str = ""
    search_aliases: list = field(default_factory=list)
    is_input_list: bool = False
    is_output_node: bool = False
    is_deprecated: bool = False
    is_experimental: bool = False
    is_dev_only: bool = False
    is_api_node: bool = False
    price_badge: PriceBadge | None = None
    not_idempotent: bool = False
    enable_expand: bool = False
    accept_all_inputs: bool = False
    essentials_category: str | None = None
    has_intermediate_output: bool = False
    loop_boundary: Literal["start", "end"] | None = None

    def validate(self) -> None:
        """Ids unique among the inputs (with those nested in non-dynamic ones) and among the outputs.

        An output may share an input's id, as in ComfyUI (packs such as Easy-Use's `easy pixels` do that).
        """
        in_ids = [n.id for i in self.inputs or [] if not isinstance(i, DynamicInput) for n in i.get_all()]
        out_ids = [o.id for o in self.outputs or []]
        issues = []
        if len(set(in_ids)) != len(in_ids):
            issues.append(f"Input ids must be unique, but {_repeated(in_ids)} are not.")
        if len(set(out_ids)) != len(out_ids):
            issues.append(f"Output ids must be unique, but {_repeated(out_ids)} are not.")
        if issues:
            raise ValueError("\n".join(issues))
        for item in [*(self.inputs or []), *(self.outputs or [])]:
            item.validate()
        if self.price_badge is not None:
            self.price_badge.validate()

    def finalize(self) -> Schema:
        """Add the hidden inputs implied by the flags and default output ids."""
        self.inputs, self.outputs, self.hidden = (
            list(self.inputs or []),
            list(self.outputs or []),
            list(self.hidden or []),
        )
        implied = []
        if self.is_api_node:
            implied += [Hidden.auth_token_comfy_org, Hidden.api_key_comfy_org, Hidden.comfy_usage_source]
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
        result = create_input_dict_v1(self.inputs)
        for h in self.hidden:
            result.setdefault("hidden", {})[h.name] = (h.value,)
        return result

    def get_v1_info(self, cls: type) -> dict:
        """The /object_info entry: NodeInfoV1's keys, in its order."""
        inputs = self.v1_inputs()
        matchtypes = [
            getattr(getattr(o, "template", None), "template_id", None) if _is_matchtype(o) else None
            for o in self.outputs
        ]
        return asdict(
            NodeInfoV1(
                input=inputs,
                input_order={key: list(value) for key, value in inputs.items()},
                is_input_list=self.is_input_list,
                output=[o.io_type for o in self.outputs],
                output_is_list=[o.is_output_list for o in self.outputs],
                output_name=[o.display_name or o.io_type for o in self.outputs],
                output_tooltips=[o.tooltip or None for o in self.outputs],
                output_matchtypes=matchtypes if any(m is not None for m in matchtypes) else None,
                name=self.node_id,
                display_name=self.display_name,
                description=self.description,
                python_module=getattr(cls, "RELATIVE_PYTHON_MODULE", None) or "nodes",
                category=self.category,
                output_node=self.is_output_node,
                deprecated=self.is_deprecated,
                experimental=self.is_experimental,
                dev_only=self.is_dev_only,
                api_node=self.is_api_node,
                price_badge=self.price_badge.as_dict(self.inputs) if self.price_badge is not None else None,
                search_aliases=self.search_aliases or None,
                essentials_category=self.essentials_category,
                has_intermediate_output=self.has_intermediate_output,
            )
        )


def _repeated(ids: list) -> list:
    return [i for i, n in Counter(ids).items() if n > 1]


def _is_matchtype(output: Any) -> bool:
    return getattr(output, "io_type", None) == "COMFY_MATCHTYPE_V3" and hasattr(output, "template")


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
    def execute(cls, **kwargs: Any) -> NodeOutput:
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

    def __init__(self) -> None:
        type(self).VALIDATE_CLASS()

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
    def INPUT_TYPES(
        cls, include_hidden: bool = True, return_schema: bool = False, live_inputs: dict | None = None
    ) -> Any:
        """The V1 inputs dict; with `live_inputs` (a prompt node's inputs) dynamic inputs are expanded
        into the inputs they stand for there ("combo.sub", "group.name0"), as ComfyUI validates them."""
        schema = cls.FINALIZE_SCHEMA()
        inputs = schema.v1_inputs()
        if live_inputs is not None:
            from comfy_bridge.compat.comfy_api.latest._io_dynamic import get_finalized_class_inputs

            inputs, _, _ = get_finalized_class_inputs(inputs, live_inputs, include_hidden=True)
        if not include_hidden:
            inputs.pop("hidden", None)
        return (inputs, schema) if return_schema else inputs

    @classmethod
    def PREPARE_CLASS_CLONE(cls, hidden_inputs: dict | None) -> type:
        """A throw-away subclass carrying this call's hidden values, so concurrent calls do not share them."""
        origin = _origin(cls)
        return type(
            origin.__name__,
            (origin,),
            {"_V3_ORIGIN": origin, "hidden": HiddenHolder(hidden_inputs), "__module__": origin.__module__},
        )

    @classmethod
    def EXECUTE_NORMALIZED(cls, *args: Any, **kwargs: Any) -> NodeOutput:
        return cls._normalize(cls.execute(*args, **kwargs))

    @classmethod
    async def EXECUTE_NORMALIZED_ASYNC(cls, *args: Any, **kwargs: Any) -> NodeOutput:
        return cls._normalize(await cls.execute(*args, **kwargs))

    @classmethod
    def _normalize(cls, value: Any) -> NodeOutput:
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
            raise Exception(
                f"Node {cls.__name__} is not expandable, but expand included in NodeOutput; "
                "developer should set enable_expand=True on node's Schema to allow this."
            )
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

    @classproperty
    def DEV_ONLY(cls) -> bool:
        return cls._schema().is_dev_only

    @classproperty
    def HAS_INTERMEDIATE_OUTPUT(cls) -> bool:
        return cls._schema().has_intermediate_output

    @classproperty
    def ACCEPT_ALL_INPUTS(cls) -> bool:
        return cls._schema().accept_all_inputs

    @classproperty
    def SCHEMA(cls) -> Schema:
        return cls._schema()


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
    def from_dict(cls, data: dict) -> NodeOutput:
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


class NodeReplace:
    """A replacement of a deprecated node class by another, mapping inputs (by id or to a set value) and outputs."""

    def __init__(
        self,
        new_node_id: str,
        old_node_id: str,
        old_widget_ids: list[str] | None = None,
        input_mapping: list[dict] | None = None,
        output_mapping: list[dict] | None = None,
    ):
        self.new_node_id, self.old_node_id, self.old_widget_ids = new_node_id, old_node_id, old_widget_ids
        self.input_mapping, self.output_mapping = input_mapping, output_mapping

    def as_dict(self) -> dict:
        return {
            "new_node_id": self.new_node_id,
            "old_node_id": self.old_node_id,
            "old_widget_ids": self.old_widget_ids,
            "input_mapping": list(self.input_mapping) if self.input_mapping else None,
            "output_mapping": list(self.output_mapping) if self.output_mapping else None,
        }


# The dynamic types live in their own module; ComfyUI offers them here.
from comfy_bridge.compat.comfy_api.latest._io_dynamic import (  # noqa: E402,F401
    Autogrow,
    DynamicCombo,
    DynamicInput,
    DynamicOutput,
    DynamicSlot,
    MatchType,
    V3Data,
    build_nested_inputs,
    get_finalized_class_inputs,
)
