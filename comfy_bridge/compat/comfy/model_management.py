"""`comfy.model_management`: devices, memory and the interrupt flag, as node packs call them.

Models live in the cluster (weights are placed by executors), so the memory functions here only
describe this process's device; interrupts go to nodes.progress.
"""

from __future__ import annotations

import enum
from typing import Any

import psutil
import torch

from nodes import progress

InterruptProcessingException = progress.InterruptProcessingException
OOM_EXCEPTION = getattr(torch, "OutOfMemoryError", MemoryError)
DISABLE_SMART_MEMORY = False
torch_version = torch.version.__version__


class VRAMState(enum.Enum):
    DISABLED = 0
    NO_VRAM = 1
    LOW_VRAM = 2
    NORMAL_VRAM = 3
    HIGH_VRAM = 4
    SHARED = 5


class CPUState(enum.Enum):
    GPU = 0
    CPU = 1
    MPS = 2


vram_state = VRAMState.NORMAL_VRAM if torch.cuda.is_available() else VRAMState.DISABLED
cpu_state = CPUState.GPU if torch.cuda.is_available() else CPUState.CPU
current_loaded_models: list = []


def interrupt_current_processing(value: bool = True) -> None:
    progress.interrupt(value)


def processing_interrupted() -> bool:
    return progress.interrupt_requested()


def throw_exception_if_processing_interrupted() -> None:
    progress.throw_if_interrupted()


def get_torch_device() -> torch.device:
    return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")


def get_autocast_device(dev: Any) -> str:
    """The device type string torch.autocast takes ("cuda" when `dev` is not a torch.device)."""
    return dev.type if hasattr(dev, "type") else "cuda"


def get_torch_device_name(device: Any = None) -> str:
    device = device or get_torch_device()
    if getattr(device, "type", "cpu") == "cuda":
        return f"{device} {torch.cuda.get_device_name(device)}"
    return str(getattr(device, "type", device))


def intermediate_device() -> torch.device:
    return torch.device("cpu")


def unet_offload_device() -> torch.device:
    return torch.device("cpu")


def text_encoder_device() -> torch.device:
    return get_torch_device()


def text_encoder_offload_device() -> torch.device:
    return torch.device("cpu")


def vae_device() -> torch.device:
    return get_torch_device()


def vae_offload_device() -> torch.device:
    return torch.device("cpu")


def vae_dtype(device: Any = None, allowed_dtypes: Any = None) -> torch.dtype:
    return torch.float32


def unet_dtype(
    device: Any = None, model_params: int = 0, supported_dtypes: Any = None, weight_dtype: Any = None
) -> torch.dtype:
    return torch.float16 if torch.cuda.is_available() else torch.float32


def text_encoder_dtype(device: Any = None) -> torch.dtype:
    return unet_dtype(device)


def get_total_memory(dev: Any = None, torch_total_too: bool = False) -> int:
    dev = dev or get_torch_device()
    if getattr(dev, "type", "cpu") == "cuda":
        total = torch.cuda.get_device_properties(dev).total_memory
        return (total, total) if torch_total_too else total
    total = psutil.virtual_memory().total
    return (total, total) if torch_total_too else total


def get_free_memory(dev: Any = None, torch_free_too: bool = False) -> Any:
    dev = dev or get_torch_device()
    if getattr(dev, "type", "cpu") == "cuda":
        free, _ = torch.cuda.mem_get_info(dev)
    else:
        free = psutil.virtual_memory().available
    return (free, free) if torch_free_too else free


def soft_empty_cache(force: bool = False) -> None:
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def unload_all_models() -> None:
    from cluster.runtime import runtime

    runtime().free(unload_models=True)


def cleanup_models(keep_clone_weights_loaded: bool = False) -> None:
    pass


def cleanup_models_gc() -> None:
    pass


def load_models_gpu(
    models: Any,
    memory_required: int = 0,
    force_patch_weights: bool = False,
    minimum_memory_required: Any = None,
    force_full_load: bool = False,
) -> None:
    """Weights are placed by cluster executors; nothing to load in this process."""


def load_model_gpu(model: Any) -> None:
    load_models_gpu([model])


def free_memory(memory_required: int, device: Any, keep_loaded: Any = ()) -> list:
    return []


def loaded_models(only_currently_used: bool = False) -> list:
    return []


def module_size(module: torch.nn.Module) -> int:
    return sum(t.nelement() * t.element_size() for t in module.state_dict().values())


def cast_to_device(tensor: torch.Tensor, device: Any, dtype: Any, copy: bool = False) -> torch.Tensor:
    return tensor.to(device=device, dtype=dtype, copy=copy)


def should_use_fp16(
    device: Any = None, model_params: int = 0, prioritize_performance: bool = True, manual_cast: bool = False
) -> bool:
    return torch.cuda.is_available()


def should_use_bf16(
    device: Any = None, model_params: int = 0, prioritize_performance: bool = True, manual_cast: bool = False
) -> bool:
    return False


def is_device_cpu(device: Any) -> bool:
    return getattr(device, "type", device) == "cpu"


def is_device_mps(device: Any) -> bool:
    return getattr(device, "type", device) == "mps"


def is_device_cuda(device: Any) -> bool:
    return getattr(device, "type", device) == "cuda"


def cpu_mode() -> bool:
    return cpu_state == CPUState.CPU


def mps_mode() -> bool:
    return cpu_state == CPUState.MPS


def xformers_enabled() -> bool:
    return False


def xformers_enabled_vae() -> bool:
    return False


def pytorch_attention_enabled() -> bool:
    return True


def pytorch_attention_flash_attention() -> bool:
    return torch.cuda.is_available()


def is_intel_xpu() -> bool:
    """This process drives no Intel XPU (models run on the executors' CUDA or CPU devices)."""
    return False


def is_directml_enabled() -> bool:
    return False


def device_supports_non_blocking(device: Any) -> bool:
    """As ComfyUI: non-blocking copies everywhere but MPS (and XPU / DirectML, which are never in use here)."""
    return not is_device_mps(device)


def dtype_size(dtype: torch.dtype) -> int:
    """Bytes per element (fp16/bf16: 2)."""
    return dtype.itemsize


def unet_manual_cast(
    weight_dtype: torch.dtype,
    inference_device: Any,
    supported_dtypes: Any = (torch.float16, torch.bfloat16, torch.float32),
) -> torch.dtype | None:
    """The dtype to compute in when weights stored as `weight_dtype` cannot be computed in directly on
    `inference_device` (None: compute in the weights' own dtype). ComfyUI's order of preference."""
    if weight_dtype in (torch.float32, torch.float64):
        return None
    fp16 = should_use_fp16(inference_device, prioritize_performance=False)
    bf16 = should_use_bf16(inference_device)
    if (weight_dtype == torch.float16 and fp16) or (weight_dtype == torch.bfloat16 and bf16):
        return None
    for dt in supported_dtypes:
        if dt == torch.float16 and should_use_fp16(inference_device, prioritize_performance=True):
            return torch.float16
        if dt == torch.bfloat16 and bf16:
            return torch.bfloat16
    return torch.float32


def cast_to(
    weight: torch.Tensor,
    dtype: torch.dtype | None = None,
    device: Any = None,
    non_blocking: bool = False,
    copy: bool = False,
    stream: Any = None,
) -> torch.Tensor:
    """`weight` in `dtype` on `device`; the same tensor when nothing changes and no copy is asked for."""
    if device is None or weight.device == torch.device(device):
        if not copy and (dtype is None or weight.dtype == dtype):
            return weight
        return weight.to(dtype=dtype, copy=copy)
    out = torch.empty_like(weight, dtype=dtype, device=device)
    out.copy_(weight, non_blocking=non_blocking)
    return out


in_training = False  # ComfyUI sets it while its training nodes run; none run here


def intermediate_dtype() -> torch.dtype:
    """The dtype of tensors passed between nodes: float32 (float16 with ComfyUI's --fp16-intermediates)."""
    from comfy_bridge.compat.comfy.cli_args import args

    return torch.float16 if getattr(args, "fp16_intermediates", False) else torch.float32
