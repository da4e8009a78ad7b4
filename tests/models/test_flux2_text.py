"""FLUX.2 Klein's text conditioning from a Qwen3 file in ComfyUI's layout (qwen_3_4b.safetensors names, real
vocabulary, tiny width, 28 layers): loaded through CLIPLoader's type flux2, tokenized in Klein's template and
padded to 512, and encoded to what diffusers' Flux2KleinPipeline computes from the same weights and ids."""

from __future__ import annotations

import pytest
import torch
from diffusers import Flux2KleinPipeline
from safetensors.torch import save_file
from transformers import Qwen3Config, Qwen3Model

from cluster.refs import ModelRef, file_digest
from nodes.models.detect import probe
from nodes.models.flux2_demo import TEXT_WIDTH, tiny_qwen3_state_dict
from nodes.models.flux2_text import KLEIN_TEMPLATE, MIN_TOKENS, PAD_ID, SUB
from nodes.models.loader import load_text_encoder
from nodes.models.qwen3_text import qwen3_config
from nodes.models.qwen_tokenizer import qwen_tokenizer

PROMPT = "a hedgehog in a tiny party hat, (confetti:1.3), flash photography"


@pytest.fixture(scope="module")
def qwen3_file(tmp_path_factory):
    sd = tiny_qwen3_state_dict(TEXT_WIDTH, torch.Generator().manual_seed(5))
    path = tmp_path_factory.mktemp("klein") / "qwen_3_tiny.safetensors"
    save_file(sd, str(path))
    return path, sd


@pytest.fixture(scope="module")
def klein(qwen3_file):
    path, _ = qwen3_file
    ref = ModelRef("text_encoder", "flux2", (str(path),), (file_digest(path),), options=(("clip_type", "flux2"),))
    return load_text_encoder(ref)


class _QwenChatTokenizer:
    """The two calls diffusers' Klein pipeline makes on its Qwen2TokenizerFast, answered as Qwen3's tokenizer
    does: the chat template with thinking off, then ids padded on the right with <|endoftext|>."""

    def __init__(self):
        self.tok = qwen_tokenizer([])

    def apply_chat_template(self, messages, tokenize, add_generation_prompt, enable_thinking):
        assert (tokenize, add_generation_prompt, enable_thinking) == (False, True, False)
        return f"<|im_start|>user\n{messages[0]['content']}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"

    def __call__(self, text, return_tensors, padding, truncation, max_length):
        ids = self.tok.encode(text)[:max_length]
        pad = max_length - len(ids)
        return {
            "input_ids": torch.tensor([ids + [PAD_ID] * pad]),
            "attention_mask": torch.tensor([[1] * len(ids) + [0] * pad]),
        }


def test_qwen3_file_is_a_text_encoder(qwen3_file):
    info = probe(qwen3_file[0])
    assert (info.arch, info.kind) == ("qwen3", "text_encoder")


def test_tokens_are_the_template_ids_padded_to_512(klein):
    tokens = klein.tokenize(PROMPT)[SUB]
    ids = [i for chunk in tokens for i, _ in chunk]
    real = qwen_tokenizer([]).encode(KLEIN_TEMPLATE.format(PROMPT))
    assert len(ids) == MIN_TOKENS and ids[: len(real)] == real and set(ids[len(real) :]) == {PAD_ID}
    assert all(w == 1.0 for chunk in tokens for _, w in chunk)  # no weight syntax for Klein


def test_conditioning_equals_the_klein_pipelines_prompt_embeds(klein, qwen3_file):
    _, sd = qwen3_file
    reference = Qwen3Model(Qwen3Config(**qwen3_config(sd))).eval()
    reference.load_state_dict({k[len("model.") :]: v for k, v in sd.items()})
    expected = Flux2KleinPipeline._get_qwen3_prompt_embeds(
        reference, _QwenChatTokenizer(), PROMPT, dtype=torch.float32, device=torch.device("cpu")
    )
    cond, pooled = klein.encode(klein.tokenize(PROMPT))
    assert pooled is None
    assert cond.shape == expected.shape == (1, 512, 3 * TEXT_WIDTH)
    assert torch.allclose(cond, expected, atol=1e-5, rtol=0), (cond - expected).abs().max()


def test_an_all_in_one_checkpoint_gives_the_separate_files_components(tmp_path):
    """ComfyUI's checkpoint prefixes (model.diffusion_model., vae., text_encoders.qwen3_4b.transformer.): the
    loaders find each part, and each computes what the separate file's part computes."""
    from nodes.models.flux2_demo import tiny_flux2_state_dicts
    from nodes.models.loader import load_diffusion_model, load_vae

    sds = tiny_flux2_state_dicts()
    prefixes = {
        "transformer": "model.diffusion_model.",
        "vae": "vae.",
        "text_encoder": "text_encoders.qwen3_4b.transformer.",
    }
    ckpt = tmp_path / "flux2-klein-tiny-aio.safetensors"
    save_file({prefixes[part] + k: v for part, sd in sds.items() for k, v in sd.items()}, str(ckpt))
    info = probe(ckpt)
    assert (info.arch, info.kind, info.components) == (
        "flux2",
        "checkpoint",
        frozenset({"diffusion_model", "vae", "text_encoder"}),
    )
    singles = {}
    for part, sd in sds.items():
        singles[part] = tmp_path / f"{part}.safetensors"
        save_file(sd, str(singles[part]))

    def ref(component, path, **options):
        return ModelRef(component, "flux2", (str(path),), (file_digest(path),), options=tuple(options.items()))

    te, te_single = (
        load_text_encoder(ref("text_encoder", ckpt)),
        load_text_encoder(ref("text_encoder", singles["text_encoder"], clip_type="flux2")),
    )
    assert torch.equal(te.encode(te.tokenize(PROMPT))[0], te_single.encode(te_single.tokenize(PROMPT))[0])
    z = torch.randn(1, 128, 2, 2, generator=torch.Generator().manual_seed(6))
    assert torch.equal(load_vae(ref("vae", ckpt)).decode(z), load_vae(ref("vae", singles["vae"])).decode(z))
    ctx, sigma = torch.randn(1, 512, 3 * TEXT_WIDTH), torch.tensor([0.7])
    assert torch.equal(
        load_diffusion_model(ref("diffusion_model", ckpt)).apply(z, sigma, {"context": ctx}),
        load_diffusion_model(ref("diffusion_model", singles["transformer"])).apply(z, sigma, {"context": ctx}),
    )
