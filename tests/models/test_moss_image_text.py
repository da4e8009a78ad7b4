"""MOSS-Image's text encoder: a Qwen3.5 file with CLIPLoader type moss_image encodes prompts as the official
pipeline does (the chat template with thinking on: the trimmed prompt as the user turn, the assistant turn opened
with `<think>\\n`; the last hidden states after the final norm, unpadded, at most 4096 tokens), and the same CLIP
still generates (the template's prompt enhancer). With any other type a Qwen3.5 file still refuses to encode."""

from __future__ import annotations

import pytest
import torch

from nodes.loaders import make_ref
from nodes.modelfns.text_generate import TextGenerateFn, TextGenerateParams
from nodes.models import qwen35_demo
from nodes.models.loader import load_text_encoder
from nodes.models.moss_image_text import MAX_TOKENS, MossImageTextEncoder
from nodes.models.qwen35_text import SUB, Qwen35TextEncoder, decode, prompt_ids


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    torch.set_num_threads(1)
    return qwen35_demo.build_demo_qwen35(tmp_path_factory.mktemp("qwen35"))[0]


@pytest.fixture(scope="module")
def encoder(text_file):
    return load_text_encoder(make_ref("text_encoder", "qwen35", [text_file], clip_type="moss_image"))


def test_clip_type_moss_image_gives_moss_images_encoder(encoder, text_file):
    assert isinstance(encoder, MossImageTextEncoder)
    other = load_text_encoder(make_ref("text_encoder", "qwen35", [text_file], clip_type="flux3"))
    assert type(other) is Qwen35TextEncoder
    with pytest.raises(ValueError, match="read here only by Generate Text"):
        other.tokenize("a cat")


def test_the_prompt_is_read_in_qwen35s_chat_template_with_thinking_on(encoder):
    ids = [t for chunk in encoder.tokenize("  a red fox \n")[SUB] for t, _ in chunk]
    assert ids == prompt_ids("<|im_start|>user\na red fox<|im_end|>\n<|im_start|>assistant\n<think>\n")
    assert decode(ids).endswith("<think>\n")
    long = encoder.tokenize("fox " * 5000)[SUB][0]
    assert len(long) == MAX_TOKENS


def test_the_conditioning_is_the_last_normed_hidden_states(encoder):
    tokens = encoder.tokenize("a red fox")
    cond, pooled = encoder.encode(tokens)
    model = encoder.modules[SUB]
    ids = torch.tensor([[t for t, _ in tokens[SUB][0]]])
    with torch.no_grad():
        states = model(input_ids=ids, output_hidden_states=True).hidden_states
    assert pooled is None and cond.shape == (1, ids.shape[1], model.config.hidden_size)
    # transformers' hidden_states end with the final norm's output; the one before is the last layer's, unnormed
    torch.testing.assert_close(cond, states[-1].float(), rtol=0, atol=0)
    assert not torch.allclose(cond, states[-2].float())


def test_the_same_clip_still_generates_as_qwen35s(text_file):
    """The template feeds one CLIPLoader to CLIPTextEncode and to Generate Text: the moss_image CLIP generates the
    same tokens as the same file loaded for generation alone."""
    params = TextGenerateParams(prompt="a red fox", max_length=6, do_sample=False)
    outs = []
    for clip_type in ("moss_image", "flux3"):
        fn = TextGenerateFn()
        clip = fn.load_model(make_ref("text_encoder", "qwen35", [text_file], clip_type=clip_type))
        outs.append(fn.execute(clip, {}, params)["ids"][0].tolist())
    assert outs[0] == outs[1] and len(outs[0]) >= 1
