"""pytest plugin (`-p comfy_bridge.compat.pytest_plugin`) for test processes that act as ComfyUI clients.

ComfyUI's execution tests import `comfy_execution.graph_utils` in the test process itself to build
prompts; loading this plugin makes our compat modules answer to those names before tests are collected.
"""

from comfy_bridge import compat

compat.install()
