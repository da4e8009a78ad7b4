"""workflows_json/text_generate.json on the demo models: TextGenerate expands the prompt with Z-Image's text
encoder (seeded sampling), the expansion is what the image is conditioned on, and a second run writes the same
text and the same image. (Both executor modes giving the same image is test_cluster_serve_matches_in_process,
which runs every shipped workflow.)"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
from PIL import Image

from tests.nodes.engine_run import run_core_prompt

WORKFLOW = Path(__file__).resolve().parents[2] / "workflows_json" / "text_generate.json"


def _run(prompt: dict, demo_workspace) -> tuple[str, np.ndarray]:
    out = asyncio.run(run_core_prompt(prompt))
    (image,) = out["12"]["images"]
    path = Path(demo_workspace.output_dir) / image["subfolder"] / image["filename"]
    return out["6"]["text"][0], np.asarray(Image.open(path))


def test_the_expanded_prompt_conditions_the_image_and_runs_are_repeatable(demo_workspace, fixed_threads):
    from nodes.loaders import CLIPLoader
    from nodes.models.loader import load_text_encoder
    from nodes.models.text_generate import Sampling, generate, language_model, prompt_ids

    prompt = json.loads(WORKFLOW.read_text())
    text, image = _run(prompt, demo_workspace)
    gen = prompt["5"]["inputs"]
    options = {k.split(".", 1)[1]: v for k, v in gen.items() if k.startswith("sampling_mode.")}
    encoder = load_text_encoder(CLIPLoader().load_clip("qwen_3_4b-tiny.safetensors", "lumina2")[0])
    ids = generate(
        language_model(encoder),
        prompt_ids(encoder, gen["prompt"]),
        gen["max_length"],
        Sampling(do_sample=True, **options),
    )
    assert text == encoder.tokenizer.decode(ids, skip_special_tokens=True).strip() != gen["prompt"]
    again_text, again_image = _run(prompt, demo_workspace)
    assert again_text == text and np.array_equal(again_image, image)
    raw = {**prompt, "7": {**prompt["7"], "inputs": {**prompt["7"]["inputs"], "text": gen["prompt"]}}}
    assert not np.array_equal(_run(raw, demo_workspace)[1], image)  # the unexpanded prompt gives another image
