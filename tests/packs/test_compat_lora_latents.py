"""comfy.lora beyond plain LoRAs (DoRA, LoCon's Tucker mid weight, nested patches, weight adapters,
unknown patch kinds) and the latent formats of model families we do not run but whose latents packs
preview (SD_X4, SC_Prior, SC_B): each checked against what the math or ComfyUI's published numbers say."""

from __future__ import annotations

import logging

import pytest
import torch

from comfy_bridge import compat

compat.install()
import comfy.latent_formats as lf  # noqa: E402
import comfy.lora  # noqa: E402
import latent_preview  # noqa: E402

from nodes import previews  # noqa: E402


@pytest.fixture(autouse=True)
def _threads():
    torch.set_num_threads(1)
    torch.manual_seed(0)


def _apply(patch, weight, strength=1.0):
    return comfy.lora.calculate_weight([(strength, patch, 1.0, None, None)], weight.clone(), "layer.weight")


def test_dora_rescales_columns_to_the_learned_magnitude():
    weight, up, down = torch.randn(4, 3), torch.randn(4, 2), torch.randn(2, 3)
    magnitude = torch.tensor([[0.5, 2.0, 3.0]])  # one per input column: DoRA's usual layout for linears
    lora = {"m.lora_up.weight": up, "m.lora_down.weight": down, "m.alpha": torch.tensor(1.0), "m.dora_scale": magnitude}
    patch = comfy.lora.load_lora(lora, {"m": "layer.weight"}, log_missing=False)["layer.weight"]
    full = _apply(patch, weight)
    # Each column of the merged weight has exactly the learned norm, pointing along W + alpha/rank * up @ down.
    assert torch.allclose(full.norm(dim=0), magnitude[0], atol=1e-5)
    merged = weight + 0.5 * up @ down
    assert torch.allclose(full / full.norm(dim=0), merged / merged.norm(dim=0), atol=1e-5)
    # A partial strength moves W that fraction of the way.
    assert torch.allclose(_apply(patch, weight, 0.25), weight + 0.25 * (full - weight), atol=1e-5)


def test_dora_on_the_output_axis_uses_the_original_row_norms():
    weight, up, down = torch.randn(4, 3), torch.randn(4, 2), torch.randn(2, 3)
    magnitude = torch.rand(4, 1) + 0.5
    patch = ("lora", (up, down, None, None, magnitude, None))
    merged = weight + up @ down
    expected = merged * magnitude / weight.norm(dim=1, keepdim=True)
    assert torch.allclose(_apply(patch, weight), expected, atol=1e-5)


def test_locon_mid_weight_is_the_three_convolutions_in_a_row():
    up, down, mid = torch.randn(5, 2, 1, 1), torch.randn(2, 3, 1, 1), torch.randn(2, 2, 3, 3)
    lora = {"c.lora_up.weight": up, "c.lora_down.weight": down, "c.lora_mid.weight": mid, "c.alpha": torch.tensor(2.0)}
    patch = comfy.lora.load_lora(lora, {"c": "conv.weight"}, log_missing=False)["conv.weight"]
    delta = _apply(patch, torch.zeros(5, 3, 3, 3))
    x = torch.randn(1, 3, 8, 8)
    conv = torch.nn.functional.conv2d
    chained = conv(conv(conv(x, down), mid, padding=1), up)  # alpha / rank = 1
    assert torch.allclose(conv(x, delta, padding=1), chained, atol=1e-4)


def test_reshape_pads_the_weight_before_merging():
    patch = ("lora", (torch.ones(3, 1), torch.ones(1, 2), None, None, None, [3, 2]))
    out = _apply(patch, torch.ones(2, 2))
    assert out.shape == (3, 2)
    assert torch.equal(out, torch.tensor([[2.0, 2.0], [2.0, 2.0], [1.0, 1.0]]))


def test_nested_patch_list_and_weight_adapters():
    base = torch.full((2,), 3.0)
    nested = [(base, lambda t, inplace: t * 2), (1.0, (torch.ones(2),), 1.0, None, None)]
    assert torch.equal(_apply(nested, torch.zeros(2), 0.5), torch.full((2,), 3.5))  # 0.5 * (3 * 2 + 1)

    class Adapter:  # ComfyUI's weight adapter protocol
        def calculate_weight(self, weight, key, strength, strength_model, offset, function, dtype, originals):
            return weight + strength * 10

    assert torch.equal(_apply(Adapter(), torch.zeros(2), 0.5), torch.full((2,), 5.0))


def test_unknown_patch_kinds_are_skipped_and_bad_patches_named(caplog):
    with caplog.at_level(logging.WARNING):
        assert torch.equal(_apply(("glora_v2", (torch.ones(2),)), torch.zeros(2)), torch.zeros(2))
    assert "glora_v2" in caplog.text
    with pytest.raises(TypeError, match="layer.weight.*str"):
        _apply("not a patch", torch.zeros(2))


@pytest.mark.parametrize(
    "cls, channels, scale", [(lf.SD_X4, 4, 0.08333), (lf.SC_Prior, 16, 1.0), (lf.SC_B, 4, 1 / 0.43)]
)
def test_cascade_and_x4_latent_formats_scale_and_preview(cls, channels, scale):
    fmt = cls()
    x = torch.randn(1, channels, 4, 4)
    assert torch.allclose(fmt.process_in(x), x * scale)
    assert torch.allclose(fmt.process_out(fmt.process_in(x)), x, atol=1e-6)
    assert len(fmt.latent_rgb_factors) == channels
    previews.set_method("latent2rgb")
    try:
        image = latent_preview.get_previewer("cpu", fmt).decode_latent_to_preview(x)
    finally:
        previews.set_method("none")
    assert image.size == (4, 4)
