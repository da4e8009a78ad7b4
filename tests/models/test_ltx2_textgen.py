"""Generate Text and Generate LTX2 Prompt on LTX-2's Gemma 3 (LTXAVTextEncoderLoader's CLIP, the LTX-2.3 templates'
prompt enhancer): the chat as ComfyUI's Gemma 3 tokenizer builds it (its template, a text begun with a turn taken
as it is; BOS, `<end_of_turn>` as its special id), greedy generation equal to transformers' own Gemma 3 generate
on the same tiny weights (the head tied to the embeddings, stopping at `<end_of_turn>`), the LTX-2 node's chat
around our system prompts, and media refused by name (no Gemma vision tower here)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import torch

from nodes.library.textgen import LTX2_I2V_SYSTEM, LTX2_T2V_SYSTEM, TextGenerate, TextGenerateLTX2Prompt
from nodes.modelfns.text_generate import TextGenerateFn, TextGenerateParams
from nodes.models.ltx2_demo import FILES
from nodes.models.ltx2_text import BOS, END_OF_TURN_ID, generation_ids
from nodes.models.text_generate import GEMMA_CHAT, generation_text


@pytest.fixture
def clip(demo_workspace):
    from nodes.library.ltxv_audio import LTXAVTextEncoderLoader

    return LTXAVTextEncoderLoader().execute(
        Path(FILES["text_encoder"]).name, Path(FILES["checkpoint"]).name, "default"
    )[0]


@pytest.fixture
def encoder(clip):
    return TextGenerateFn().load_model(clip)


def test_generation_text():
    assert generation_text("ltx2", "a fox") == GEMMA_CHAT.format("a fox")
    assert GEMMA_CHAT.startswith("<start_of_turn>system\nYou are a helpful assistant.<end_of_turn>\n")
    assert generation_text("ltx2", "a fox", use_template=False) == "a fox"
    assert generation_text("ltx2", "<start_of_turn>user\nx") == "<start_of_turn>user\nx"
    assert generation_text("ltx2", "a fox", system_prompt="ignored") == GEMMA_CHAT.format("a fox")


def test_generation_ids(encoder):
    ids = generation_ids(encoder, "a fox<end_of_turn>\nthe end")
    assert ids[0] == BOS and ids.count(END_OF_TURN_ID) == 1
    words = [encoder.tokenizer(w) for w in ("a", "fox", "\nthe", "end")]
    assert ids == [BOS, *words[0], *words[1], END_OF_TURN_ID, *words[2], *words[3]]


def _reference(encoder):
    from transformers import Gemma3ForCausalLM

    gemma = encoder.modules["gemma3_12b"]
    ref = Gemma3ForCausalLM(gemma.config).eval()
    ref.model.load_state_dict(gemma.state_dict())
    with torch.no_grad():  # Gemma ties its output head to the embedding
        ref.lm_head.weight.copy_(gemma.embed_tokens.weight)
    return ref


@pytest.mark.parametrize("prompt", ["a red fox running through fresh snow", "<start_of_turn>user\nsoft jazz music"])
def test_greedy_generation_equals_transformers(encoder, prompt):
    torch.set_num_threads(1)
    params = TextGenerateParams(prompt=prompt, max_length=12, do_sample=False)
    out = TextGenerateFn().execute(encoder, {}, params)
    ids = generation_ids(encoder, generation_text("ltx2", prompt))
    with torch.no_grad():
        expected = _reference(encoder).generate(
            torch.tensor([ids]), max_new_tokens=12, do_sample=False, eos_token_id=[END_OF_TURN_ID], pad_token_id=0
        )[0, len(ids) :]
    assert out["ids"][0].tolist() == expected.tolist()
    assert len(expected) > 1  # generation ran past its first token


def test_ltx2_prompt_wraps_the_prompt_in_its_chat(clip, monkeypatch):
    seen = []

    async def generate(self, clip, prompt, *args, **kwargs):
        seen.append(prompt)
        return "", ""

    monkeypatch.setattr(TextGenerate, "execute", generate)
    node = TextGenerateLTX2Prompt()
    text, _ = asyncio.run(node.execute(clip, "a fox", 16, "off"))
    assert text == "a fox"  # an empty answer gives the prompt back
    assert seen[-1] == (
        f"<start_of_turn>system\n{LTX2_T2V_SYSTEM}<end_of_turn>\n"
        "<start_of_turn>user\n\nUser Raw Input Prompt: a fox.<end_of_turn>\n<start_of_turn>model\n"
    )
    asyncio.run(node.execute(clip, "a fox", 16, "off", image=torch.zeros(1, 8, 8, 3)))
    assert seen[-1].startswith(f"<start_of_turn>system\n{LTX2_I2V_SYSTEM}<end_of_turn>\n")
    assert "\n<image_soft_token>\n\nUser Raw Input Prompt: a fox." in seen[-1]
    asyncio.run(node.execute(clip, "a fox", 16, "off", system_prompt="  Mine.  "))
    assert seen[-1].startswith("<start_of_turn>system\nMine.<end_of_turn>\n")


def test_ltx2_prompt_generates_through_the_model_fn(clip, encoder):
    torch.set_num_threads(1)
    node = TextGenerateLTX2Prompt()
    text, thinking = asyncio.run(node.execute(clip, "a fox", 8, "off"))
    chat = (
        f"<start_of_turn>system\n{LTX2_T2V_SYSTEM}<end_of_turn>\n"
        "<start_of_turn>user\n\nUser Raw Input Prompt: a fox.<end_of_turn>\n<start_of_turn>model\n"
    )
    direct = TextGenerateFn().execute(encoder, {}, TextGenerateParams(prompt=chat, max_length=8))
    assert text == (bytes(direct["text"].numpy()).decode().strip() or "a fox") and thinking == ""


def test_media_is_refused_by_name(clip):
    with pytest.raises(ValueError, match=r"image: TextGenerate reads text only here .*LTX-2 \(Gemma 3\)"):
        asyncio.run(TextGenerateLTX2Prompt().execute(clip, "a fox", 8, "off", image=torch.zeros(1, 8, 8, 3)))
