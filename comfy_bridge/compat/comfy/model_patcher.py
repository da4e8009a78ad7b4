"""`comfy.model_patcher`: ModelPatcher is the MODEL proxy (packs check isinstance and call its methods)."""
from comfy_bridge.packs.proxies import ModelPatcher

__all__ = ["ModelPatcher"]
