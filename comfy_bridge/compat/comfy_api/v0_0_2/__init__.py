"""`comfy_api.v0_0_2`: this API version is the latest one."""

from comfy_bridge.compat.comfy_api.latest import ComfyAPI, ComfyAPISync, ComfyExtension, Input, InputImpl, Types, io, ui

__all__ = ["ComfyAPI", "ComfyAPISync", "ComfyExtension", "Input", "InputImpl", "Types", "io", "ui"]
