"""The TextGenerate node (today's ComfyUI `Generate Text`) on the demo text encoders: its dynamic sampling combo
reaches the generation (the option's optional presence_penalty included), a UI workflow's widget list maps to
the same inputs the web UI sends, and inputs it cannot use give errors that name them."""

from __future__ import annotations

import asyncio

import pytest
import torch

from tests.nodes.engine_run import run_core_prompt

ZIMAGE_TE = ("qwen_3_4b-tiny.safetensors", "lumina2")
QWEN_IMAGE_TE = ("qwen_2.5_vl_7b_tiny.safetensors", "qwen_image")
KLEIN_TE = ("flux2-klein-tiny-qwen3.safetensors", "flux2")
SAMPLING = {
    "sampling_mode.temperature": 0.7,
    "sampling_mode.top_k": 64,
    "sampling_mode.top_p": 0.95,
    "sampling_mode.min_p": 0.05,
    "sampling_mode.repetition_penalty": 1.05,
    "sampling_mode.seed": 11,
    "sampling_mode.presence_penalty": 0.5,
}


def _expected(te: tuple[str, str], prompt: str, max_length: int, sampling) -> str:
    from nodes.loaders import CLIPLoader
    from nodes.models.loader import load_text_encoder
    from nodes.models.text_generate import decode, generate, language_model, prompt_ids

    encoder = load_text_encoder(CLIPLoader().load_clip(*te)[0])
    ids = generate(language_model(encoder), prompt_ids(encoder, prompt), max_length, sampling)
    return decode(encoder, ids).strip()


def _prompt(te: tuple[str, str], mode_inputs: dict) -> dict:
    return {
        "1": {"class_type": "CLIPLoader", "inputs": {"clip_name": te[0], "type": te[1]}},
        "2": {
            "class_type": "TextGenerate",
            "inputs": {"clip": ["1", 0], "prompt": "a red fox", "max_length": 9, **mode_inputs},
        },
        "3": {"class_type": "PreviewAny", "inputs": {"source": ["2", 0]}},
    }


def test_sampled_text_follows_the_combo_options_through_validation_and_the_engine(demo_workspace, fixed_threads):
    from nodes.models.text_generate import Sampling

    out = asyncio.run(run_core_prompt(_prompt(ZIMAGE_TE, {"sampling_mode": "on", **SAMPLING})))
    options = {k.split(".", 1)[1]: v for k, v in SAMPLING.items()}
    assert out["3"]["text"] == [_expected(ZIMAGE_TE, "a red fox", 9, Sampling(do_sample=True, **options))]
    # a different presence penalty changes the text: the optional option input is read, not dropped
    other = asyncio.run(
        run_core_prompt(_prompt(ZIMAGE_TE, {"sampling_mode": "on", **SAMPLING, "sampling_mode.presence_penalty": 0.0}))
    )
    assert other["3"]["text"] == [
        _expected(ZIMAGE_TE, "a red fox", 9, Sampling(do_sample=True, **{**options, "presence_penalty": 0.0}))
    ]


@pytest.mark.parametrize("te", [QWEN_IMAGE_TE, KLEIN_TE], ids=lambda te: te[1])
def test_sampling_off_is_greedy(demo_workspace, fixed_threads, te):
    from nodes.models.text_generate import Sampling

    out = asyncio.run(run_core_prompt(_prompt(te, {"sampling_mode": "off"})))
    assert out["3"]["text"] == [_expected(te, "a red fox", 9, Sampling())]


def test_a_ui_workflows_widgets_become_the_inputs_the_web_ui_sends(demo_workspace):
    from comfy_bridge.formats import ui_to_api
    from comfy_bridge.registry import build_registry

    # the widget list of a TextGenerate in today's templates (image_fibo2_edit_dev_pe)
    widgets = ["Turn the coat into black leather.", 3000, "on", 0.3, 20, 0.95, 0.05, 1.05, 1234, 0, False, True, "off"]
    ui = {"nodes": [{"id": 5, "type": "TextGenerate", "mode": 0, "inputs": [], "widgets_values": widgets}], "links": []}
    inputs = ui_to_api(ui, build_registry(demo_workspace))["5"]["inputs"]
    assert inputs == {
        "prompt": widgets[0],
        "max_length": 3000,
        "sampling_mode": "on",
        "sampling_mode.temperature": 0.3,
        "sampling_mode.top_k": 20,
        "sampling_mode.top_p": 0.95,
        "sampling_mode.min_p": 0.05,
        "sampling_mode.repetition_penalty": 1.05,
        "sampling_mode.seed": 1234,
        "sampling_mode.presence_penalty": 0,
        "thinking": False,
        "use_default_template": True,
        "mtp": "off",
    }
    off = ui_to_api(
        {**ui, "nodes": [{**ui["nodes"][0], "widgets_values": ["fox", 64, "off", True, False, "auto"]}]},
        build_registry(demo_workspace),
    )["5"]["inputs"]
    assert off == {
        "prompt": "fox",
        "max_length": 64,
        "sampling_mode": "off",
        "thinking": True,
        "use_default_template": False,
        "mtp": "auto",
    }


def _generate(te_or_ckpt, **kwargs):
    from nodes.library.textgen import TextGenerate
    from nodes.loaders import CheckpointLoaderSimple, CLIPLoader

    clip = (
        CLIPLoader().load_clip(*te_or_ckpt)[0]
        if isinstance(te_or_ckpt, tuple)
        else CheckpointLoaderSimple().load_checkpoint(te_or_ckpt)[1]
    )
    return asyncio.run(TextGenerate().execute(clip, "a red fox", 4, "off", **kwargs))


def test_inputs_it_cannot_use_are_named_in_the_error(demo_workspace):
    with pytest.raises(Exception, match="clip: TextGenerate needs a language-model text encoder.*sd1"):
        _generate("sd1-tiny.safetensors")
    with pytest.raises(Exception, match="image: TextGenerate reads text only"):
        _generate(QWEN_IMAGE_TE, image=torch.zeros(1, 8, 8, 3))
    with pytest.raises(ValueError, match="sampling_mode: 'maybe' is not one of on, off"):
        from nodes.library.textgen import TextGenerate
        from nodes.loaders import CLIPLoader

        asyncio.run(TextGenerate().execute(CLIPLoader().load_clip(*ZIMAGE_TE)[0], "fox", 4, "maybe"))
    # Z-Image's tokenizer drops an image, as ComfyUI's does
    assert _generate(ZIMAGE_TE, image=torch.zeros(1, 8, 8, 3)) == _generate(ZIMAGE_TE)
