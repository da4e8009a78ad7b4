"""Write workflows_json/hunyuan_image_2_1_t2i.ui.json and .json: Hunyuan Image 2.1 text-to-image on the tiny files
(nodes/models/hunyuan_image_demo.py), the text-to-image graph of ComfyUI's Hunyuan Image 2.1 example: UNETLoader,
DualCLIPLoader type hunyuan_image on the Qwen2.5-VL and the ByT5 glyph encoder, CLIPTextEncode for both prompts (the
positive quotes a word, which the glyph encoder reads), EmptyHunyuanImageLatent 128x96, KSampler (seed 42, 4 steps, cfg 3.5, euler, simple), VAELoader with the
32x VAE, VAEDecode, SaveImage. The templates package has no Hunyuan Image 2.1 template, so the UI graph is written
here; the API format is our UI converter's output.

    python scripts/hunyuan_image_workflow.py <workspace with demo-models>
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
NAME = "hunyuan_image_2_1_t2i"
POSITIVE = 'a red fox reading a newspaper titled "HUNYUAN" on a park bench, autumn light'
NEGATIVE = "blurry, low quality"
# (id, type, widgets, inputs [(name, type, source id, source slot)], outputs [(name, type)])
NODES = [
    (1, "UNETLoader", ["hunyuanimage2.1_tiny.safetensors", "default"], [], [("MODEL", "MODEL")]),
    (
        2,
        "DualCLIPLoader",
        [
            "qwen_2.5_vl_7b_hunyuan_image_tiny.safetensors",
            "byt5_small_glyphxl_tiny.safetensors",
            "hunyuan_image",
            "default",
        ],
        [],
        [("CLIP", "CLIP")],
    ),
    (3, "CLIPTextEncode", [POSITIVE], [("clip", "CLIP", 2, 0)], [("CONDITIONING", "CONDITIONING")]),
    (4, "CLIPTextEncode", [NEGATIVE], [("clip", "CLIP", 2, 0)], [("CONDITIONING", "CONDITIONING")]),
    (5, "EmptyHunyuanImageLatent", [128, 96, 1], [], [("LATENT", "LATENT")]),
    (
        6,
        "KSampler",
        [42, "fixed", 4, 3.5, "euler", "simple", 1.0],
        [
            ("model", "MODEL", 1, 0),
            ("positive", "CONDITIONING", 3, 0),
            ("negative", "CONDITIONING", 4, 0),
            ("latent_image", "LATENT", 5, 0),
        ],
        [("LATENT", "LATENT")],
    ),
    (7, "VAELoader", ["hunyuan_image_2.1_vae_tiny.safetensors"], [], [("VAE", "VAE")]),
    (8, "VAEDecode", [], [("samples", "LATENT", 6, 0), ("vae", "VAE", 7, 0)], [("IMAGE", "IMAGE")]),
    (9, "SaveImage", ["HunyuanImage2.1"], [("images", "IMAGE", 8, 0)], []),
]


def ui_graph() -> dict:
    """The UI-format graph of NODES, laid out left to right."""
    links, nodes = [], []
    outgoing: dict[tuple[int, int], list[int]] = {}
    for node_id, _, _, inputs, _ in NODES:
        for name, kind, src, slot in inputs:
            link = len(links) + 1
            target = [n for n, *_ in inputs].index(name)
            links.append([link, src, slot, node_id, target, kind])
            outgoing.setdefault((src, slot), []).append(link)
    link_of = {(link[3], link[4]): link[0] for link in links}
    for order, (node_id, kind, widgets, inputs, outputs) in enumerate(NODES):
        nodes.append(
            {
                "id": node_id,
                "type": kind,
                "pos": [40 + 320 * (order % 5), 60 + 360 * (order // 5)],
                "size": [300, 120],
                "flags": {},
                "order": order,
                "mode": 0,
                "inputs": [
                    {"name": name, "type": t, "link": link_of[(node_id, i)]} for i, (name, t, _, _) in enumerate(inputs)
                ],
                "outputs": [
                    {"name": name, "type": t, "links": outgoing.get((node_id, slot)) or None}
                    for slot, (name, t) in enumerate(outputs)
                ],
                "properties": {"Node name for S&R": kind},
                "widgets_values": list(widgets),
            }
        )
    return {
        "last_node_id": NODES[-1][0],
        "last_link_id": len(links),
        "nodes": nodes,
        "links": links,
        "groups": [],
        "config": {},
        "extra": {},
        "version": 0.4,
    }


def main() -> None:
    from scripts.workflow_files import workspace_registry, write_workflow

    write_workflow(NAME, ui_graph(), workspace_registry(sys.argv[1]))


if __name__ == "__main__":
    main()
