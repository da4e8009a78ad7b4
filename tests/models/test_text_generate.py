"""TextGenerate's generation on the demo text encoders (nodes.models.text_generate): greedy decoding gives
transformers' own `generate` tokens on the same weights, sampling is reproducible by seed, and each sampling
filter does what ComfyUI's does."""

from __future__ import annotations

import pytest
import torch

from nodes.models.text_generate import (
    STOP_TOKENS,
    Sampling,
    generate,
    generation_text,
    language_model,
    next_token,
    prompt_ids,
    split_thinking,
)

ENCODERS = {
    "zimage": ("qwen_3_4b-tiny.safetensors", "lumina2"),
    "flux2": ("flux2-klein-tiny-qwen3.safetensors", "flux2"),
    "qwen_image": ("qwen_2.5_vl_7b_tiny.safetensors", "qwen_image"),
}
ON = Sampling(do_sample=True, temperature=0.7, top_k=64, top_p=0.95, min_p=0.05, repetition_penalty=1.05, seed=7)


@pytest.fixture(scope="module", params=sorted(ENCODERS))
def encoder(request, demo_workspace):
    from nodes.loaders import CLIPLoader
    from nodes.models.loader import load_text_encoder

    torch.set_num_threads(1)
    (ref,) = CLIPLoader().load_clip(*ENCODERS[request.param])
    return load_text_encoder(ref)


def _causal_lm(encoder, head: torch.nn.Linear | None = None):
    """transformers' LM for the encoder's language model: the same weights, the head `head` or, without one,
    tied to the embeddings."""
    from transformers import Qwen2ForCausalLM, Qwen3ForCausalLM

    body = language_model(encoder)
    config = type(body.config).from_dict(
        {**body.config.to_dict(), "tie_word_embeddings": head is None, "use_cache": True}
    )
    lm = (Qwen2ForCausalLM if encoder.arch == "qwen_image" else Qwen3ForCausalLM)(config).eval()
    missing, unexpected = lm.model.load_state_dict(body.state_dict(), strict=False)
    assert not unexpected and all("rotary" in k for k in missing), (missing, unexpected)
    if head is None:
        lm.tie_weights()
    else:
        lm.lm_head.weight.data.copy_(head.weight)
    return lm


def _hf_greedy(encoder, ids: list[int], new: int, eos: list[int], head=None) -> list[int]:
    lm = _causal_lm(encoder, head)
    out = lm.generate(
        torch.tensor([ids]),
        attention_mask=torch.ones(1, len(ids), dtype=torch.long),
        do_sample=False,
        max_new_tokens=new,
        eos_token_id=eos,
        pad_token_id=eos[0],
    )
    return out[0, len(ids) :].tolist()


def test_greedy_generation_is_transformers_generate_on_the_same_weights(encoder):
    ids = prompt_ids(encoder, "a red fox sitting beside a campfire")
    ours = generate(language_model(encoder), ids, 12, Sampling())
    assert ours == _hf_greedy(encoder, ids, 12, list(STOP_TOKENS))
    # a stop token ends the text after it, as transformers' eos does (the third token made a stop token here)
    stop = ours[2]
    stopped = generate(language_model(encoder), ids, 12, Sampling(), stop_tokens=(stop,))
    assert stopped == ours[: ours.index(stop) + 1] == _hf_greedy(encoder, ids, 12, [stop])


def test_a_files_own_lm_head_gives_the_logits(encoder, tmp_path):
    """An untied model's file (Qwen3-8B, Qwen2.5-VL-7B) has an lm_head: it is read, and greedy decoding equals
    transformers' with that head."""
    from safetensors.torch import save_file

    from nodes.models.text_generate import HEAD, attach_head

    body = language_model(encoder)
    weight = torch.randn(body.embed_tokens.weight.shape, generator=torch.Generator().manual_seed(3))
    path = tmp_path / "te.safetensors"
    save_file({**{f"model.{k}": v for k, v in body.state_dict().items()}, "lm_head.weight": weight}, str(path))
    attach_head(encoder, str(path))
    head = encoder.modules.pop(HEAD)
    assert torch.equal(head.weight, weight.to(head.weight.dtype))
    ids = prompt_ids(encoder, "a red fox")
    ours = generate(body, ids, 8, Sampling(), head=head)
    assert ours == _hf_greedy(encoder, ids, 8, list(STOP_TOKENS), head)
    assert ours != generate(body, ids, 8, Sampling())  # the embeddings would have given other tokens
    # a scaled fp8 file's head (ComfyUI's *_fp8_scaled layout): the fp8 weight times its scale
    fp8, scale = weight.to(torch.float8_e4m3fn), torch.tensor(0.5)
    save_file(
        {"model.embed_tokens.weight": body.embed_tokens.weight, "lm_head.weight": fp8, "lm_head.scale_weight": scale},
        str(path),
    )
    attach_head(encoder, str(path))
    assert torch.equal(encoder.modules.pop(HEAD).weight, (fp8.float() * scale).to(head.weight.dtype))


def test_seeded_sampling_gives_the_same_text_every_time_and_the_seed_matters(encoder):
    ids = prompt_ids(encoder, "a lighthouse in the fog")
    model = language_model(encoder)
    first = generate(model, ids, 10, ON)
    assert generate(model, ids, 10, ON) == first
    assert generate(model, ids, 10, Sampling(**{**ON.__dict__, "seed": 8})) != first
    # with only the likeliest token left, sampling is greedy decoding
    assert generate(model, ids, 10, Sampling(**{**ON.__dict__, "top_k": 1})) == generate(model, ids, 10, Sampling())


def test_the_chat_text_is_built_as_each_familys_tokenizer_builds_it():
    user = "<|im_start|>user\nfox<|im_end|>\n<|im_start|>assistant\n"
    assert generation_text("zimage", "fox") == user
    assert (
        generation_text("zimage", "fox", use_template=False, system_prompt="be brief")
        == "<|im_start|>system\nbe brief<|im_end|>\n" + user
    )  # Z-Image's tokenizer has no raw mode
    assert (
        generation_text("qwen_image", "fox", system_prompt="be brief")
        == "<|im_start|>system\nbe brief<|im_end|>\n" + user
    )
    assert generation_text("qwen_image", "fox", use_template=False, system_prompt="be brief") == "fox"
    assert generation_text("flux2", "fox", use_template=False) == user + "<think>\n\n</think>\n\n"  # Klein's
    assert generation_text("qwen_image", "<|im_start|>user\nfox") == "<|im_start|>user\nfox"
    with pytest.raises(ValueError, match="clip: TextGenerate needs a language-model text encoder.*sd1"):
        generation_text("sd1", "fox")


def test_repetition_and_presence_penalties_act_on_generated_tokens_only():
    logits = torch.tensor([[3.0, 2.0, -1.0]])
    greedy_sample = dict(do_sample=True, top_k=1, top_p=1.0, min_p=0.0)
    assert next_token(logits, [], Sampling(**greedy_sample, repetition_penalty=2.0), None) == 0
    # a seen positive logit is divided (3 -> 1.5), so token 1 (2.0) wins
    assert next_token(logits, [0], Sampling(**greedy_sample, repetition_penalty=2.0), None) == 1
    # a seen negative logit is multiplied: -1 x 0.5 = -0.5 now beats the unseen -0.8
    assert next_token(torch.tensor([[-1.0, -0.8]]), [0], Sampling(**greedy_sample, repetition_penalty=0.5), None) == 0
    assert next_token(logits, [0], Sampling(**greedy_sample, presence_penalty=1.5), None) == 1
    assert next_token(logits, [0], Sampling(do_sample=False, repetition_penalty=2.0), None) == 0  # greedy: none


@pytest.mark.parametrize(
    "filters, allowed",
    [
        ({"min_p": 0.4, "top_p": 1.0}, {0, 1}),  # p = .6/.3/.1: below 0.4 x 0.6 goes
        ({"min_p": 0.0, "top_p": 0.5}, {0}),  # the likeliest already passes 0.5
        ({"min_p": 0.0, "top_p": 0.8}, {0}),  # ComfyUI drops the token whose sum crosses top_p (0.9) too
        ({"min_p": 0.0, "top_p": 0.95}, {0, 1}),
        ({"min_p": 0.0, "top_p": 1.0}, {0, 1, 2}),
    ],
)
def test_min_p_and_top_p_keep_the_tokens_comfyui_keeps(filters, allowed):
    logits = torch.tensor([[0.6, 0.3, 0.1]]).log()
    for top_k in (0, 3):  # with and without a top-k (the filters then work on the k best)
        s = Sampling(do_sample=True, temperature=1.0, top_k=top_k, **filters)
        g = torch.Generator().manual_seed(0)
        drawn = {next_token(logits, [], s, g) for _ in range(300)}
        assert drawn == allowed


def test_thinking_is_split_off_as_comfyui_splits_it():
    assert split_thinking(" a fox ") == ("a fox", "")
    assert split_thinking("<think>fur colour</think> a red fox") == ("a red fox", "fur colour")
    assert split_thinking("fur colour</think>a red fox") == ("a red fox", "fur colour")  # the prompt opened it
    assert split_thinking("<think>cut short") == ("", "cut short")


def test_a_qwen3_that_reasons_first_keeps_its_think_tags_for_the_thinking_output(encoder):
    from nodes.models.text_generate import decode, tokenizer

    words = tokenizer(encoder).encode(" red fox")
    ids = [151667, *words, 151668, *words, 151645]
    if encoder.arch == "qwen_image":  # Qwen2.5's vocabulary ends at 151664: those rows are no tokens
        assert decode(encoder, ids) == decode(encoder, words) * 2
    else:
        text = decode(encoder, ids)
        assert text == f"<think>{decode(encoder, words)}</think>{decode(encoder, words)}"
        assert split_thinking(text) == (decode(encoder, words).strip(), decode(encoder, words).strip())
