"""The ComfyUI protocol server (aiohttp): HTTP routes, websocket, prompt queue and worker."""
from .app import PromptServer, create_app, run_server, start_server
from .config import ServerConfig

__all__ = ["PromptServer", "ServerConfig", "create_app", "run_server", "start_server"]
