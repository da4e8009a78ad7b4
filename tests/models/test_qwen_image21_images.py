"""Qwen-Image 2.1's text encoder reading reference images (nodes/models/qwen_image21_text.py with
nodes/models/qwen3vl_vision.py), checked against diffusers 0.42.1's QwenImage21Pipeline prompt encoding, which runs
transformers' own Qwen3VLForConditionalGeneration (its vision tower, DeepStack and 3-axis rotary positions) on the
same token ids, pixel values and grids; the pipeline's processor is stood in for with Qwen2's tokenizer and the
pixels ComfyUI's preprocessing gives, so what differs between the two is only ComfyUI's side. ComfyUI's
conditioning slice (comfy/text_encoders/qwen_image21.py): the system turn dropped, and with reference latents the
image tokens too, each image's slot being where its tokens stood."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from nodes.loaders import make_ref
from nodes.models import loader
from nodes.models.qwen3vl_vision import IMAGE_PAD_ID, preprocess
from nodes.models.qwen_image21_text import SUB, SYSTEM, chat_text
from tests.models.test_qwen3vl_vision import tiny_qwen3vl


@pytest.fixture(scope="module", params=[(0,), (0, 1)], ids=["deepstack-1", "deepstack-every-layer"])
def encoder(tmp_path_factory, request):
    """The tiny model with one DeepStack merger, and with one per language-model layer (then ComfyUI reads the
    last layer after its DeepStack add, as transformers' last hidden state has it)."""
    torch.set_num_threads(1)
    model = tiny_qwen3vl(seed=1, deepstack=request.param)
    path = tmp_path_factory.mktemp("qwen3vl_images") / "qwen3vl_8b_tiny.safetensors"
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path))
    te = loader.load_text_encoder(make_ref("text_encoder", "qwen_image21", [path], clip_type="qwen_image"))
    return model, te


@pytest.fixture(scope="module")
def images():
    torch.manual_seed(7)
    return [torch.rand(1, 64, 96, 3), torch.rand(1, 96, 32, 3)]  # the second grows to 128x64 (3,072 < 3,136 px)


def test_chat_text_is_comfyuis_template_with_image_slots() -> None:
    """QwenImage21Tokenizer: T2I_TEMPLATE with "<imageN>" + the vision block per image, joined by spaces, before
    the prompt; an empty prompt reads as a space; chat text is kept as it is."""
    block = "<|vision_start|><|image_pad|><|vision_end|>"
    assert chat_text("a cat", 2) == (
        "<|im_start|>system\nComprehend and analyze the provided prompt.<|im_end|>\n<|im_start|>user\n"
        f"<image1>{block} <image2>{block}a cat<|im_end|>\n<|im_start|>assistant\n"
    )
    assert chat_text("", 0).endswith("user\n <|im_end|>\n<|im_start|>assistant\n")
    assert chat_text("<|im_start|>user\nraw", 1) == "<|im_start|>user\nraw"


def diffusers_prompt_embeds(model, tokenizer, prompt: str, images: list[torch.Tensor]):
    """QwenImage21Pipeline._get_qwen_prompt_embeds with images, its processor replaced by one that expands each
    <|image_pad|> to the picture's merged tokens and hands over ComfyUI's pixel values and grids."""
    from diffusers import QwenImage21Pipeline
    from transformers import BatchEncoding

    prepared = [preprocess(image) for image in images]

    class Processor:
        def __call__(self, text, images=None, **_):
            assert len(text) == 1 and len(images) == len(prepared)
            ids, pending = [], iter(prepared)
            for t in tokenizer.encode(text[0]):
                ids += [t] * (int(next(pending)[1].prod()) // 4 if t == IMAGE_PAD_ID else 1)
            ids = torch.tensor([ids])
            return BatchEncoding(
                {
                    "input_ids": ids,
                    "attention_mask": torch.ones_like(ids),
                    "pixel_values": torch.cat([p for p, _ in prepared]),
                    "image_grid_thw": torch.cat([g for _, g in prepared]),
                    "mm_token_type_ids": (ids == IMAGE_PAD_ID).int(),
                }
            )

    pipe = object.__new__(QwenImage21Pipeline)
    pipe.__dict__.update(
        text_encoder=model,
        processor=Processor(),
        _drop_idx=len(tokenizer.encode(SYSTEM)),
        _img_token_id=IMAGE_PAD_ID,
        sys_prompt="Comprehend and analyze the provided prompt.",
    )
    pipe.prompt_template_ti2i = (
        "<|im_start|>system\nComprehend and analyze the provided prompt.<|im_end|>\n"
        "<|im_start|>user\n<image1><|vision_start|><|image_pad|><|vision_end|>{}<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    pixels = [(image[0].numpy() * 255).astype(np.uint8) for image in images]  # the pipeline makes PIL images
    with torch.no_grad():
        embeds, _, pad_mask = pipe._get_qwen_prompt_embeds(prompt, pixels, device=torch.device("cpu"))
    return embeds[0], pad_mask[0]


@pytest.mark.parametrize("count", [1, 2])
def test_image_prompt_equals_the_diffusers_pipeline(encoder, images, count) -> None:
    model, te = encoder
    expected, pads = diffusers_prompt_embeds(model, te.tokenizer, "turn the fox red", images[:count])
    tokens = te.tokenize("turn the fox red", images=count)
    kept, no_slots = te.encode_with_slots(tokens, images[:count], keep_vision=True)
    assert no_slots == [] and kept.shape == (1, *expected.shape)
    torch.testing.assert_close(kept[0], expected, rtol=0, atol=1e-5)

    dropped, slots = te.encode_with_slots(tokens, images[:count], keep_vision=False)
    torch.testing.assert_close(dropped[0], expected[~pads], rtol=0, atol=1e-5)
    runs = [i for i in range(len(pads)) if pads[i] and (i == 0 or not pads[i - 1])]
    assert slots == [start - int(pads[:start].sum()) for start in runs]
    assert len(slots) == count and pads.sum() == (6 + 8 if count == 2 else 6)  # 4x6 and 8x4 patches, 2x2 merged


def test_the_images_condition_the_prompt(encoder, images) -> None:
    """The vision tokens and the DeepStack features both reach the text: other pixels change the text rows."""
    _, te = encoder
    tokens = te.tokenize("a fox", images=1)
    one, _ = te.encode_with_slots(tokens, images[:1], keep_vision=False)
    other, _ = te.encode_with_slots(tokens, [1 - images[0]], keep_vision=False)
    assert one.shape == other.shape and (one - other).abs().max() > 1e-3


def test_an_encoder_without_a_vision_tower_refuses_images_by_name(encoder, images) -> None:
    """(ComfyUI's detection takes a Qwen3-VL file for Qwen-Image 2.1's only with its vision tower; an encoder
    built without one still says why it cannot read images.)"""
    _, te = encoder
    text_only = te.__class__(**{**te.__dict__, "modules": {SUB: te.modules[SUB]}})
    assert text_only.encode(text_only.tokenize("a fox"))[0].shape[0] == 1  # text alone still encodes
    with pytest.raises(ValueError, match=r"clip: this Qwen3-VL text encoder file has no vision tower"):
        text_only.encode(text_only.tokenize("a fox", images=1), images[:1])
