"""LTX-2.5's prompt enhancer: CLIPLoader (type ltxv) on a Gemma 4 file without the projection gives a CLIP that
generates (nodes/models/gemma4_chat.py). Greedy generation on the tiny E2B-shaped file (per-layer inputs, KV-shared
layers, sliding windows) equals transformers' Gemma4ForCausalLM.generate on the same weights and ids (tied head,
logits soft-capped at 30, stopping at ComfyUI's ids 1, 50 and 106); Generate LTX2 Prompt wraps the prompt in Gemma
4's turns and strips the channel markers; images are refused by name, as is encoding with this file."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import torch
from transformers import Gemma4TextConfig
from transformers.models.gemma4.modeling_gemma4 import Gemma4ForCausalLM

from nodes.models import gemma4_chat, ltx25_demo
from tests.node_calls import active_workspace, call_node

MAX_NEW = 24


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    yield from active_workspace(tmp_path_factory.mktemp("gemma4"), ltx25_demo.build_demo_ltx25_text)


def reference_ids(sd: dict[str, torch.Tensor], ids: list[int]) -> list[int]:
    """transformers' greedy generation (its own cache handling of the sliding and KV-shared layers)."""
    config = Gemma4TextConfig(
        **ltx25_demo.GEMMA4_E2B,
        rope_parameters=ltx25_demo.GEMMA4_ROPE,
        rms_norm_eps=1e-6,
        final_logit_softcapping=30.0,
        tie_word_embeddings=True,
    )
    model = Gemma4ForCausalLM(config).eval()
    model.load_state_dict({k: v.float() for k, v in sd.items() if k.startswith("model.")}, strict=False)
    model.tie_weights()
    with torch.no_grad():
        out = model.generate(
            torch.tensor([ids]), max_new_tokens=MAX_NEW, do_sample=False, eos_token_id=[1, 50, 106], pad_token_id=0
        )
    return out[0, len(ids) :].tolist()


def test_generate_ltx2_prompt_on_gemma4_is_transformers_greedy_generation(workspace) -> None:
    from safetensors.torch import load_file

    torch.set_num_threads(1)
    path = workspace.models_dir / ltx25_demo.ENHANCER_FILE
    sd = load_file(str(path))
    system = "Describe the scene."

    async def run():
        (clip,) = await call_node("CLIPLoader", clip_name=Path(ltx25_demo.ENHANCER_FILE).name, type="ltxv")
        return await call_node(
            "TextGenerateLTX2Prompt",
            clip=clip,
            prompt="a red fox",
            max_length=MAX_NEW,
            sampling_mode="off",
            system_prompt=system,
        )

    text, _ = asyncio.run(run())
    from tokenizers import Tokenizer

    from nodes.library.textgen import GEMMA4_MARKERS
    from nodes.library.textgen import gemma4_chat as build_chat

    formatted = build_chat(system, "a red fox", image=False, thinking=False)
    assert formatted.startswith("<|turn>system\n") and formatted.endswith("<|turn>model\n<|channel>final\n")
    tokenizer = Tokenizer.from_str(sd["tokenizer_json"].numpy().tobytes().decode("utf-8"))
    ids = [2] + tokenizer.encode(formatted, add_special_tokens=False).ids
    assert 105 in ids and 106 in ids  # the turn markers are single special tokens
    new = reference_ids(sd, ids)
    want = tokenizer.decode(new, skip_special_tokens=False)
    want = want.replace("<|channel>thought\n", "<think>\n").replace("<channel|>", "</think>")
    want = GEMMA4_MARKERS.sub("", want.replace("<turn|>", "").replace("<eos>", "").strip()).strip()
    assert want and text == want  # the tiny model writes something: no fallback to the user's prompt


def test_images_and_encoding_are_refused_by_name(workspace) -> None:
    async def enhance_image():
        (clip,) = await call_node("CLIPLoader", clip_name=Path(ltx25_demo.ENHANCER_FILE).name, type="ltxv")
        image = torch.zeros(1, 32, 32, 3)
        return await call_node(
            "TextGenerateLTX2Prompt", clip=clip, prompt="a fox", max_length=4, sampling_mode="off", image=image
        )

    with pytest.raises(Exception, match="image: TextGenerate reads text only here .*LTX-2.5 \\(Gemma 4\\)"):
        asyncio.run(enhance_image())

    async def encode():
        (clip,) = await call_node("CLIPLoader", clip_name=Path(ltx25_demo.ENHANCER_FILE).name, type="ltxv")
        return await call_node("CLIPTextEncode", clip=clip, text="a fox")

    with pytest.raises(Exception, match="read here only to generate text"):
        asyncio.run(encode())


def test_logits_are_soft_capped_and_turns_decoded_as_comfyui_does() -> None:
    capped = gemma4_chat.softcap(torch.tensor([[60.0, -3.0]]))
    torch.testing.assert_close(capped, 30.0 * torch.tanh(torch.tensor([[2.0, -0.1]])))
    assert gemma4_chat.chat_text("hi") == "<|turn>user\nhi<turn|>\n<|turn>model\n"
    assert gemma4_chat.chat_text("hi", thinking=True).startswith("<|turn>system\n<|think|><turn|>\n")
    assert gemma4_chat.chat_text("<|turn>user\nraw") == "<|turn>user\nraw"
    assert gemma4_chat.chat_text("hi", use_template=False) == "hi"
