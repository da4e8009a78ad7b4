"""scripts/templates_render.py: a subgraph instance saved with no widget values (the LTX-2.3 IC-LoRA ingredients
template) gives its promoted inputs the values of the inner widgets its proxyWidgets show, also to the other inner
inputs the same subgraph input feeds; where the proxy list is not one entry per instance widget (the SCAIL-2
templates), the proxy is the one whose inner widget the subgraph input feeds, read in its class's widget order;
MoGe-2's files map to the tiny MoGe-2 file, MoGe-3's to none."""

from __future__ import annotations

from scripts import templates_render


def _instance_and_subgraph() -> tuple[dict, dict]:
    instance = {
        "id": 129,
        "inputs": [
            {"name": "input", "type": "IMAGE", "link": 5},
            {"name": "text", "type": "STRING", "widget": {"name": "text"}, "link": None},
            {"name": "noise_seed", "type": "INT", "widget": {"name": "noise_seed"}, "link": None},
            {"name": "value", "type": "INT", "widget": {"name": "value"}, "link": None},
        ],
        "properties": {"proxyWidgets": [["209", "prompt"], ["704", "seed"], ["704", "steps"]]},
        "widgets_values": [],
    }
    subgraph = {
        "nodes": [
            {
                "id": 209,
                "inputs": [{"name": "clip", "link": 1}, {"name": "prompt", "widget": {"name": "prompt"}, "link": 2}],
                "widgets_values": ["a long prompt", 2048, "on"],
            },
            {
                "id": 704,
                "inputs": [
                    {"name": "model", "link": 3},
                    {"name": "seed", "widget": {"name": "seed"}, "link": 4},
                    {"name": "steps", "widget": {"name": "steps"}, "link": None},
                ],
                "widgets_values": [123, "randomize", 8, 1.0],
            },
        ]
    }
    return instance, subgraph


def test_proxied_widgets_give_the_inner_values() -> None:
    instance, subgraph = _instance_and_subgraph()
    assert templates_render.proxied_value(instance, "text", subgraph) == "a long prompt"
    assert templates_render.proxied_value(instance, "noise_seed", subgraph) == 123
    # after a seed its control value ("randomize") is skipped
    assert templates_render.proxied_value(instance, "value", subgraph) == 8
    assert templates_render.proxied_value(instance, "input", subgraph) is None


def test_proxy_lists_of_another_length_give_nothing() -> None:
    instance, subgraph = _instance_and_subgraph()
    instance["properties"]["proxyWidgets"] = instance["properties"]["proxyWidgets"][:2]
    assert templates_render.proxied_value(instance, "text", subgraph) is None


def test_a_proxy_is_found_by_the_subgraph_input_that_feeds_it() -> None:
    """SCAIL-2's Base subgraph: 23 proxies for 15 widget inputs; its SamplerCustom lists only noise_seed and cfg
    among its inputs, so noise_seed's value sits after add_noise in widgets_values, which only the class's widget
    order tells."""
    from comfy_bridge.registry import build_registry

    instance = {
        "inputs": [{"name": "length", "type": "INT", "widget": {"name": "length"}, "link": None}],
        "properties": {"proxyWidgets": [["3", "text"], ["177", "length"], ["19", "noise_seed"]]},
        "widgets_values": [],
    }
    subgraph = {
        "inputs": [{"name": "length", "linkIds": [522, 541]}, {"name": "noise_seed", "linkIds": [558]}],
        "nodes": [
            {
                "id": 177,
                "type": "ImageFromBatch",
                "inputs": [
                    {"name": "image", "link": 490},
                    {"name": "batch_index", "widget": {"name": "batch_index"}, "link": 450},
                    {"name": "length", "widget": {"name": "length"}, "link": 522},
                ],
                "widgets_values": [0, 81],
            },
            {
                "id": 19,
                "type": "SamplerCustom",
                "inputs": [
                    {"name": "model", "link": 417},
                    {"name": "noise_seed", "widget": {"name": "noise_seed"}, "link": 558},
                    {"name": "cfg", "widget": {"name": "cfg"}, "link": 431},
                ],
                "widgets_values": [True, 7, "fixed", 1],
            },
        ],
    }
    registry = build_registry(None)
    assert templates_render.proxied_value(instance, "length", subgraph, registry) == 81
    assert templates_render.proxied_value(instance, "noise_seed", subgraph, registry) == 7
    # without the registry only the positional reading is done: 3 proxies for 1 widget input give nothing
    assert templates_render.proxied_value(instance, "noise_seed", subgraph) is None


def test_moge_files_map_to_the_tiny_moge_2() -> None:
    asked = ["moge_2_vitl_normal_fp16.safetensors"]
    assert templates_render.demo_file(asked[0], asked) == "moge_2_vitl_normal_tiny.safetensors"
    assert templates_render.demo_file("moge_3_vitg_fp16.safetensors", ["moge_3_vitg_fp16.safetensors"]) is None
