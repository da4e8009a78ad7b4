"""Qwen3-VL's vision tower (nodes/models/qwen3vl_vision.py): ComfyUI's resize rule (numbers derived by hand from
comfy/text_encoders/qwen_vl.py's process_qwen2vl_images at patch 16, merge 2), the patch layout equal to
transformers' own Qwen2-VL image processor, and the tower loaded from a checkpoint's `model.visual.*` tensors
equal to transformers' Qwen3VLModel.get_image_features on the same weights."""

from __future__ import annotations

import pytest
import torch

from nodes.models.errors import ModelLoadError
from nodes.models.qwen3vl_vision import build_vision_model, encode_image, preprocess, resized_size, vision_config


def tiny_qwen3vl(seed: int = 0, deepstack=(0,)):
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    torch.manual_seed(seed)
    cfg = Qwen3VLConfig(
        text_config={
            "vocab_size": 151_936,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "head_dim": 16,
            "rope_parameters": {"rope_type": "default", "rope_theta": 5_000_000.0, "mrope_section": [24, 20, 20]},
        },
        vision_config={
            "depth": 2,
            "hidden_size": 64,  # 16 heads (ComfyUI's count) of 4
            "intermediate_size": 48,
            "num_heads": 16,
            "out_hidden_size": 32,
            "deepstack_visual_indexes": list(deepstack),
            "num_position_embeddings": 64,
        },
    )
    model = Qwen3VLForConditionalGeneration(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.1)  # ones and zeros would hide a skipped norm or bias
    return model


@pytest.mark.parametrize(
    ("size", "expected"),
    [
        ((1024, 1024), (1024, 1024)),
        ((1000, 1500), (992, 1504)),  # 31.25 -> 31 cells, 46.875 -> 47
        ((80, 48), (64, 64)),  # 2.5 -> 2 and 1.5 -> 2: Python's round, halves to even
        ((32, 32), (64, 64)),  # 1,024 < 3,136 pixels: x sqrt(3136/1024) = 1.75, cells ceiled
        ((40, 100), (64, 96)),  # 32x96 = 3,072 < 3,136: x 0.885 -> 1.11 and 2.77 cells, ceiled
        ((4096, 4096), (3584, 3584)),  # above 12,845,056: / (8/7) -> 112 cells each, floored
        ((5000, 3000), (4608, 2752)),  # 4992x3008 too large: / 1.0806 -> 144.6 and 86.8 cells, floored
        ((17, 9), (96, 64)),  # 9 px rounds to no cell: grown by 4.53 -> 2.4 and 1.3 cells, ceiled
    ],
)
def test_resize_follows_comfyuis_rule(size, expected) -> None:
    assert resized_size(*size) == expected


def test_patches_equal_transformers_image_processor() -> None:
    """At a size needing no resize, the patches are transformers' Qwen2-VL processor's (mean/std 0.5)."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    processor = Qwen2VLImageProcessorPil(
        do_resize=False, do_rescale=False, image_mean=[0.5] * 3, image_std=[0.5] * 3, patch_size=16, merge_size=2
    )
    torch.manual_seed(3)
    image = torch.rand(2, 64, 96, 4)  # only the first picture and its first three channels are read
    expected = processor(images=[image[0, :, :, :3].movedim(-1, 0).numpy()], return_tensors="pt")
    pixels, grid = preprocess(image)
    assert grid.tolist() == expected["image_grid_thw"].tolist() == [[1, 4, 6]]
    torch.testing.assert_close(pixels, expected["pixel_values"], rtol=0, atol=1e-6)


def test_a_resized_picture_is_bilinear_without_antialias() -> None:
    torch.manual_seed(4)
    image = torch.rand(1, 50, 70, 3)  # -> 64x64
    pixels, grid = preprocess(image)
    assert grid.tolist() == [[1, 4, 4]]
    direct = torch.nn.functional.interpolate(image.movedim(-1, 1), size=(64, 64), mode="bilinear") * 2 - 1
    again, _ = preprocess(((direct + 1) / 2).movedim(1, -1))  # already whole cells: no second resize
    torch.testing.assert_close(pixels, again, rtol=0, atol=1e-6)


@pytest.fixture(scope="module")
def reference():
    return tiny_qwen3vl()


@pytest.mark.parametrize("size", [(64, 96), (50, 70), (130, 40)])
def test_tower_equals_transformers_image_features(reference, size) -> None:
    torch.set_num_threads(1)
    tower = build_vision_model(reference.state_dict(), "qwen3vl_tiny.safetensors")
    torch.manual_seed(5)
    image = torch.rand(1, *size, 3)
    ours = encode_image(tower, image)
    pixels, grid = preprocess(image)
    with torch.no_grad():
        expected = reference.model.get_image_features(pixels, grid)
    assert ours.grid == tuple(grid[0].tolist())
    assert ours.tokens == grid[0, 1] * grid[0, 2] // 4
    torch.testing.assert_close(ours.embeds, expected.pooler_output[0], rtol=0, atol=1e-5)
    assert len(ours.deepstack) == 1
    torch.testing.assert_close(ours.deepstack[0], expected.deepstack_features[0][0], rtol=0, atol=1e-5)


def test_config_is_read_from_the_shapes(reference) -> None:
    sd = {k[len("model.visual.") :]: v for k, v in reference.state_dict().items() if k.startswith("model.visual.")}
    cfg = vision_config(sd)
    ref = reference.config.vision_config
    for key in ("depth", "hidden_size", "intermediate_size", "num_heads", "patch_size", "temporal_patch_size"):
        assert getattr(cfg, key) == getattr(ref, key), key
    assert (cfg.out_hidden_size, cfg.num_position_embeddings) == (32, 64)
    assert cfg.deepstack_visual_indexes == [0]


def test_comfyuis_deepstack_blocks_by_depth() -> None:
    """ComfyUI fixes the DeepStack blocks per model: 27-block towers (8B, 32B) at 8, 16, 24."""
    shapes = {
        "patch_embed.proj.weight": torch.empty(1152, 3, 2, 16, 16, device="meta"),
        "blocks.0.mlp.linear_fc1.weight": torch.empty(4304, 1152, device="meta"),
        "merger.linear_fc2.weight": torch.empty(4096, 4608, device="meta"),
        "pos_embed.weight": torch.empty(2304, 1152, device="meta"),
        **{f"blocks.{i}.norm1.weight": torch.empty(1152, device="meta") for i in range(27)},
        **{f"deepstack_merger_list.{i}.norm.weight": torch.empty(4608, device="meta") for i in range(3)},
    }
    cfg = vision_config(shapes)
    assert (cfg.depth, cfg.num_heads, cfg.deepstack_visual_indexes, cfg.out_hidden_size) == (27, 16, [8, 16, 24], 4096)


def test_a_tower_with_a_missing_tensor_is_refused_by_name(reference) -> None:
    sd = {k: v for k, v in reference.state_dict().items() if not k.endswith("merger.linear_fc1.weight")}
    with pytest.raises(ModelLoadError, match=r"qwen3vl_tiny.safetensors.*merger.linear_fc1.weight"):
        build_vision_model(sd, "qwen3vl_tiny.safetensors")
    with pytest.raises(ModelLoadError, match="no Qwen3-VL vision tower"):
        build_vision_model({"model.language_model.norm.weight": torch.ones(2)}, "qwen3vl_tiny.safetensors")


def test_an_image_without_three_channels_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 3 channels"):
        preprocess(torch.rand(1, 32, 32, 1))


def test_demo_text_encoder_has_the_published_vision_layout() -> None:
    """The tiny Qwen-Image 2.1 text encoder's tower in the published Qwen3-VL key layout: `model.visual.` +
    the module names of ComfyUI's tower (comfy/text_encoders/qwen35.py Qwen35VisionModel at 06990860 and qwen3vl.py
    Qwen3VLDeepstackMerger at 1ad32705, which load a published file once `model.visual.` becomes `visual.`, the
    same prefix vLLM's hf_to_vllm_mapper maps for Qwen/Qwen3-VL-* checkpoints); the merger's norm before the 2x2
    shuffle, the DeepStack mergers' after it. It loads and reads an image."""
    from nodes.models.qwen_image21_demo import tiny_qwen_image21_state_dicts

    sd = tiny_qwen_image21_state_dicts()["text_encoder"]
    visual = {k[len("model.visual.") :]: v for k, v in sd.items() if k.startswith("model.visual.")}
    both = ("weight", "bias")
    expected = {"pos_embed.weight", *(f"patch_embed.proj.{e}" for e in both)}
    for i in range(2):
        for part in ("norm1", "norm2", "attn.qkv", "attn.proj", "mlp.linear_fc1", "mlp.linear_fc2"):
            expected |= {f"blocks.{i}.{part}.{e}" for e in both}
    for part in ("merger", "deepstack_merger_list.0"):
        expected |= {f"{part}.{layer}.{e}" for layer in ("norm", "linear_fc1", "linear_fc2") for e in both}
    assert set(visual) == expected
    assert visual["merger.norm.weight"].shape == (64,) and visual["deepstack_merger_list.0.norm.weight"].shape == (256,)
    assert visual["patch_embed.proj.weight"].shape == (64, 3, 2, 16, 16)
    assert {k for k in sd if not k.startswith("model.visual.")} - {"lm_head.weight"} == {
        k for k in sd if k.startswith("model.language_model.")
    }
    tower = build_vision_model(sd, "qwen3vl_8b_tiny.safetensors")
    assert (tower.config.num_heads, tower.config.deepstack_visual_indexes) == (16, [0])
    out = encode_image(tower, torch.rand(1, 64, 64, 3))
    assert out.embeds.shape == (4, 32) and out.deepstack[0].shape == (4, 32)
