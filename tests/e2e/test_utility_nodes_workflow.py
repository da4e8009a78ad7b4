"""workflows_json/utility_nodes.json on the demo model: the resolution selector and math expressions size
the latent (16:9 at 0.1 MP is 432x240, a third of it 144x80), the switch picks the landscape latent, and the
list of two prompts makes the sampler run once per prompt. (Both executor modes giving the same images is
test_cluster_serve_matches_in_process, which runs every shipped workflow.)"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
from PIL import Image

WORKFLOW = Path(__file__).resolve().parents[2] / "workflows_json" / "utility_nodes.json"


def test_the_utility_nodes_workflow_makes_one_landscape_image_per_listed_prompt(demo_workspace, fixed_threads):
    from comfy_bridge.cli.run import run_prompt
    from comfy_bridge.registry import build_registry

    files = asyncio.run(
        run_prompt(json.loads(WORKFLOW.read_text()), None, build_registry(demo_workspace), show_progress=False)
    )
    images = [np.asarray(Image.open(f)) for f in files]
    assert [im.shape for im in images] == [(80, 144, 3), (80, 144, 3)]
    assert not np.array_equal(images[0], images[1])  # two prompts, two different images
