"""`comfy_execution.progress` -> the engine's per-prompt progress registry."""

from comfy_bridge.execution.progress_state import ProgressRegistry, get_progress_state

__all__ = ["ProgressRegistry", "get_progress_state"]
