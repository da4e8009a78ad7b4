"""ComfyUI's PhotoMaker workflow (workflows_json/photomaker.json, UI format beside it) on sdxl-tiny and the tiny
PhotoMaker file: PhotoMakerLoader, LoadImage, PhotoMakerEncode as the positive prompt, KSampler, VAEDecode. From a
fresh, empty workspace (serve builds the demo files on its first start) the image is the same with the default
executors and with `--executors 0`. PhotoMakerEncode's conditioning equals ComfyUI 0.3.64's in
tests/nodes/test_photomaker.py (on text encoders with the OpenAI vocabulary; sdxl-tiny's own is byte-level, which
ComfyUI's tokenizer cannot read, so this image has no ComfyUI recording)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.served import render_in_both_modes

SHIPPED = Path(__file__).resolve().parents[2] / "workflows_json" / "photomaker"


def test_workflow_in_both_executor_modes(tmp_path) -> None:
    prompt = json.loads(SHIPPED.with_suffix(".json").read_text())
    image = render_in_both_modes(tmp_path, prompt)
    assert image.shape == (64, 64, 3) and image.std() > 0
