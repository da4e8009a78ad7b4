"""Type names and the V1 node base class that node packs annotate with (`comfy.comfy_types.node_typing`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from enum import Enum
from typing import Any, Literal, NotRequired, TypedDict


class StrEnum(str, Enum):
    def __str__(self) -> str:
        return self.value


class IO(StrEnum):
    """Socket type names; ANY ("*") matches everything and comma lists match by overlap (via `!=`)."""

    STRING = "STRING"
    IMAGE = "IMAGE"
    MASK = "MASK"
    LATENT = "LATENT"
    BOOLEAN = "BOOLEAN"
    INT = "INT"
    FLOAT = "FLOAT"
    COMBO = "COMBO"
    CONDITIONING = "CONDITIONING"
    SAMPLER = "SAMPLER"
    SIGMAS = "SIGMAS"
    GUIDER = "GUIDER"
    NOISE = "NOISE"
    CLIP = "CLIP"
    CONTROL_NET = "CONTROL_NET"
    VAE = "VAE"
    MODEL = "MODEL"
    LORA_MODEL = "LORA_MODEL"
    LOSS_MAP = "LOSS_MAP"
    CLIP_VISION = "CLIP_VISION"
    CLIP_VISION_OUTPUT = "CLIP_VISION_OUTPUT"
    STYLE_MODEL = "STYLE_MODEL"
    GLIGEN = "GLIGEN"
    UPSCALE_MODEL = "UPSCALE_MODEL"
    AUDIO = "AUDIO"
    WEBCAM = "WEBCAM"
    POINT = "POINT"
    FACE_ANALYSIS = "FACE_ANALYSIS"
    BBOX = "BBOX"
    SEGS = "SEGS"
    VIDEO = "VIDEO"
    ANY = "*"
    NUMBER = "FLOAT,INT"
    PRIMITIVE = "STRING,FLOAT,INT,BOOLEAN"

    def __ne__(self, value: object) -> bool:
        if self == "*" or value == "*":
            return False
        if not isinstance(value, str):
            return True
        a, b = frozenset(self.split(",")), frozenset(value.split(","))
        return not (a <= b or b <= a)

    __hash__ = str.__hash__


class RemoteInputOptions(TypedDict):
    route: str
    refresh_button: bool
    control_after_refresh: Literal["first", "last"]
    timeout: int
    max_retries: int
    refresh: int


class MultiSelectOptions(TypedDict):
    placeholder: NotRequired[str]
    chip: NotRequired[bool]


class InputTypeOptions(TypedDict, total=False):
    default: Any
    defaultInput: bool
    forceInput: bool
    lazy: bool
    rawLink: bool
    tooltip: str
    min: float
    max: float
    step: float
    round: float
    label_on: str
    label_off: str
    multiline: bool
    placeholder: str
    dynamicPrompts: bool
    image_upload: bool
    image_folder: str
    remote: RemoteInputOptions
    control_after_generate: bool
    options: list
    multi_select: MultiSelectOptions


class HiddenInputTypeDict(TypedDict, total=False):
    unique_id: Literal["UNIQUE_ID"]
    prompt: Literal["PROMPT"]
    extra_pnginfo: Literal["EXTRA_PNGINFO"]
    dynprompt: Literal["DYNPROMPT"]


class InputTypeDict(TypedDict, total=False):
    required: dict[str, tuple]
    optional: dict[str, tuple]
    hidden: HiddenInputTypeDict


class ComfyNodeABC(ABC):
    """Base class V1 nodes may derive from (annotations only; INPUT_TYPES is the one required member)."""

    DESCRIPTION: str
    CATEGORY: str
    EXPERIMENTAL: bool
    DEPRECATED: bool
    OUTPUT_NODE: bool
    INPUT_IS_LIST: bool
    OUTPUT_IS_LIST: tuple
    RETURN_TYPES: tuple
    RETURN_NAMES: tuple
    OUTPUT_TOOLTIPS: tuple
    FUNCTION: str

    @classmethod
    @abstractmethod
    def INPUT_TYPES(s) -> InputTypeDict: ...


class CheckLazyMixin:
    """check_lazy_status that asks for every input not evaluated yet."""

    def check_lazy_status(self, **kwargs: Any) -> list[str]:
        return [name for name, value in kwargs.items() if value is None]


class FileLocator(TypedDict):
    filename: str
    subfolder: str
    type: Literal["input", "output", "temp"]
