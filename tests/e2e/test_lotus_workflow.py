"""The web UI's Lotus depth template (workflows_json/lotus_depth.json, written by scripts/lotus_workflow.py: the
template's node graph with its subgraph unpacked, lotus-depth-d-v1-1_tiny and sd1-tiny-vae substituted, example.png as
its input): LoadImage -> VAEEncode, UNETLoader, LotusConditioning -> BasicGuider, BasicScheduler normal 1 step ->
SetFirstSigma 999, KSamplerSelect euler, DisableNoise, SamplerCustomAdvanced, VAEDecode, ImageInvert, SaveImage. From a
fresh, empty workspace (serve builds the demo files on its first start) the depth image is the same with the default
executors and with `--executors 0`. The sampling chain's latents equal ComfyUI 0.3.64's in tests/nodes/test_lotus.py
(ComfyUI's own VAE classes cannot hold the tiny SD VAE's widths, so no whole-image reference is recorded)."""

from __future__ import annotations

import json
from pathlib import Path

from scripts.lotus_workflow import TEMPLATE, tiny_template
from tests.e2e.served import render_in_both_modes

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "workflows_json" / "lotus_depth"


def test_shipped_workflow_is_the_templates_graph() -> None:
    from scripts.templates_coverage import templates_dir

    template = json.loads((templates_dir() / f"{TEMPLATE}.json").read_text())
    ui = json.loads(SHIPPED.with_suffix(".ui.json").read_text())
    assert ui == tiny_template()
    subgraphs = template["definitions"]["subgraphs"]
    ids = {sg["id"] for sg in subgraphs}
    outer = [n["type"] for n in template["nodes"] if n["type"] not in ids]
    assert sorted(n["type"] for n in ui["nodes"]) == sorted(
        outer + [n["type"] for sg in subgraphs for n in sg["nodes"]]
    )
    prompt = json.loads(SHIPPED.with_suffix(".json").read_text())
    assert {n["class_type"] for n in prompt.values()} >= {"LotusConditioning", "SetFirstSigma", "ImageInvert"}


def test_template_in_both_executor_modes(tmp_path) -> None:
    prompt = json.loads(SHIPPED.with_suffix(".json").read_text())
    default = render_in_both_modes(tmp_path, prompt)
    assert default.shape == (128, 128, 3) and default.std() > 0
