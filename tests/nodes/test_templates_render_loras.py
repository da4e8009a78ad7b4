"""scripts/templates_render.py for the LoRA templates: a bypassed subgraph instance passes its input of the output's
type through, as the web UI does (flux1_dev_uso_reference_image_gen feeds its KSampler's model through two bypassed
USOStyleReference subgraphs), and the LoRAs with a tiny file of their layout map to it."""

from __future__ import annotations

from scripts import templates_render


def _style_subgraph() -> dict:
    return {
        "id": "style",
        "inputs": [{"name": "image", "type": "IMAGE"}, {"name": "model", "type": "MODEL"}],
        "outputs": [{"name": "MODEL", "type": "MODEL"}],
        "nodes": [{"id": 1, "type": "Styled", "inputs": [{"name": "model", "link": 1}, {"name": "image", "link": 2}]}],
        "links": [
            {"id": 1, "origin_id": -10, "origin_slot": 1, "target_id": 1, "target_slot": 0},
            {"id": 2, "origin_id": -10, "origin_slot": 0, "target_id": 1, "target_slot": 1},
            {"id": 3, "origin_id": 1, "origin_slot": 0, "target_id": -20, "target_slot": 0},
        ],
    }


def _workflow(mode: int) -> dict:
    instance = {
        "id": 3,
        "type": "style",
        "mode": mode,
        "inputs": [{"name": "image", "type": "IMAGE", "link": 11}, {"name": "model", "type": "MODEL", "link": 10}],
        "outputs": [{"name": "MODEL", "type": "MODEL", "links": [12]}],
    }
    return {
        "nodes": [
            {"id": 1, "type": "LoraLoaderModelOnly", "outputs": [{"type": "MODEL"}]},
            {"id": 2, "type": "LoadImage", "outputs": [{"type": "IMAGE"}]},
            instance,
            {"id": 4, "type": "KSampler", "inputs": [{"name": "model", "type": "MODEL", "link": 12}]},
        ],
        "links": [[10, 1, 0, 3, 1, "MODEL"], [11, 2, 0, 3, 0, "IMAGE"], [12, 3, 0, 4, 0, "MODEL"]],
        "definitions": {"subgraphs": [_style_subgraph()]},
    }


def _model_source(flat: dict) -> str:
    by_id = {n["id"]: n for n in flat["nodes"]}
    (sampler,) = [n for n in flat["nodes"] if n["type"] == "KSampler"]
    (link,) = [lk for lk in flat["links"] if lk[0] == sampler["inputs"][0]["link"]]
    return by_id[link[1]]["type"]


def test_a_bypassed_subgraph_passes_its_input_of_the_outputs_type_through():
    assert _model_source(templates_render.flat_workflow(_workflow(4))) == "LoraLoaderModelOnly"
    flat = templates_render.flat_workflow(_workflow(0))  # active: its inner node feeds the sampler
    assert _model_source(flat) == "Styled"


def test_loras_map_to_the_tiny_file_of_their_layout():
    uso = ["flux1-dev-fp8.safetensors", "uso-flux1-dit-lora-v1.safetensors", "uso-flux1-projector-v1.safetensors"]
    assert [templates_render.demo_file(n, uso) for n in uso] == [
        "flux1-dev-uso-tiny.safetensors",  # the released depth, which ComfyUI's USO LoRA test reads
        "uso-flux1-dit-lora-v1-tiny.safetensors",
        "uso-flux1-projector-v1-tiny.safetensors",
    ]
    assert templates_render.demo_file("flux1-dev-fp8.safetensors", ["flux1-dev-fp8.safetensors"]) == (
        "flux-tiny.safetensors"
    )
    zimage = ["z_image_turbo_bf16.safetensors", "pixel_art_style_z_image_turbo.safetensors"]
    assert templates_render.demo_file(zimage[1], zimage) == "z_image_turbo_lora_tiny.safetensors"
