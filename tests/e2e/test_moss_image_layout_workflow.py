"""The web UI's MOSS-Image bounding-box template (image_moss_image_t2i_bboxes; the Base model's bbox template is the
same graph with another file name, which maps to the same tiny file) as scripts/templates_render.py runs it: Create
Bounding Boxes' elements through MOSS-Image Layout Prompt into the text-to-image subgraph, the tiny MOSS-Image
transformer, tiny Qwen3.5 and FLUX.2's tiny VAE in place of the downloads. Through serve from a fresh workspace the
saved image is the same with the default executors and with `--executors 0`."""

from __future__ import annotations

import pytest

from tests.e2e.served import render_in_both_modes
from tests.e2e.test_moss_image_workflow import template_prompt


# Two server starts, the first building every demo file: past the default 600 s on a loaded 2-core machine.
@pytest.mark.timeout(1800)
def test_bbox_template_renders_the_same_in_both_executor_modes(tmp_path) -> None:
    prompt = template_prompt("image_moss_image_t2i_bboxes", tmp_path / "registry")
    by_class = {n["class_type"]: n["inputs"] for n in prompt.values()}
    assert {"CreateBoundingBoxes", "MOSSImageLayoutPrompt", "CLIPTextEncode", "KSampler", "SaveImage"} <= set(by_class)
    assert by_class["MOSSImageLayoutPrompt"]["character_boxes"] == "2"
    default = render_in_both_modes(tmp_path, prompt)
    assert default.ndim == 3 and default.shape[2] == 3 and default.std() > 0
