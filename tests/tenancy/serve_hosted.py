"""Run a hosted server on the tiny test nodes: python serve_hosted.py WORKSPACE STATE_DB PORT."""

import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import tenant_nodes  # noqa: E402

from comfy_bridge.server import ServerConfig, run_server  # noqa: E402
from nodes.workspace import Workspace  # noqa: E402

if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    workspace, state_db, port = sys.argv[1:4]
    tenant_nodes.TSaveThenWait.RUNS_LOG = str(Path(workspace) / "runs.log")
    web = Path(workspace) / "web"
    web.mkdir(parents=True, exist_ok=True)
    config = ServerConfig(
        workspace=Workspace(Path(workspace)).create(),
        state_db=state_db,
        port=int(port),
        front_end_root=web,
        dont_print_server=True,
    )
    run_server(config, registry=tenant_nodes.registry())
