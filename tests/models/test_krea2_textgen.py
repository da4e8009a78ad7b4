"""TextGenerate on Krea 2's Qwen3-VL (the Krea 2 Turbo template's prompt enhancer, CLIPLoader type krea2): the
chat text as ComfyUI's Qwen3VL tokenizer builds it (the reasoning block closed unless thinking, raw without the
template), and greedy generation equal to transformers' own generate on the same tiny weights."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

from nodes.loaders import make_ref
from nodes.modelfns.text_generate import TextGenerateFn, TextGenerateParams
from nodes.models.krea2_demo import build_demo_krea2, tiny_text_encoder
from nodes.models.text_generate import CHAT, CLOSED_THINKING, generation_text


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    return build_demo_krea2(tmp_path_factory.mktemp("krea2_textgen"))[1]


def test_generation_text():
    assert generation_text("krea2", "a fox", thinking=True) == CHAT.format("a fox")
    assert (
        generation_text("krea2", "a fox")
        == CHAT.format("a fox") + "<think>\n\n</think>\n\n"
        == CHAT.format("a fox") + CLOSED_THINKING
    )
    assert generation_text(
        "krea2", "a fox", system_prompt="S", thinking=True
    ) == "<|im_start|>system\nS<|im_end|>\n" + CHAT.format("a fox")
    assert generation_text("krea2", "a fox", use_template=False) == "a fox"
    assert generation_text("krea2", "<|im_start|>user\nx") == "<|im_start|>user\nx"


@pytest.mark.parametrize("thinking", [True, False])
def test_greedy_generation_equals_transformers(text_file, thinking):
    torch.set_num_threads(1)
    fn = TextGenerateFn()
    encoder = fn.load_model(make_ref("text_encoder", "krea2", [text_file], clip_type="krea2"))
    params = TextGenerateParams(
        prompt="a red fox",
        max_length=12,
        use_template=True,
        system_prompt="Expand.",
        thinking=thinking,
        do_sample=False,
    )
    out = fn.execute(encoder, {}, params)
    ids = encoder.tokenizer.encode(generation_text("krea2", "a red fox", True, "Expand.", thinking))
    ref = tiny_text_encoder()
    sd = load_file(text_file)
    ref.load_state_dict(sd, strict=False)
    with torch.no_grad():  # the 4B ties its output head to the embedding
        ref.lm_head.weight.copy_(sd["model.language_model.embed_tokens.weight"])
        expected = ref.generate(
            torch.tensor([ids]), max_new_tokens=12, do_sample=False, eos_token_id=[151643, 151645], pad_token_id=151643
        )[0, len(ids) :]
    assert out["ids"][0].tolist() == expected.tolist()


def test_images_are_refused_by_name():
    from nodes.models.text_generate import check_media

    with pytest.raises(ValueError, match="image: .*Krea 2's encoder.*leave the image input unconnected"):
        check_media("krea2", ["image"])
