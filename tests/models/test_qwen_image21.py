"""Qwen-Image 2.1 transformer: detection by the newest ComfyUI source's model_detection rule, loading ComfyUI's
fused `img_mlp.gate_up` layout, and one denoising step with today's ComfyUI semantics, checked against diffusers'
QwenImage21Transformer2DModel forward on the same tiny random weights (no runnable ComfyUI has 2.1: 0.10.0 is
the newest that runs here)."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import torch
from diffusers import AutoencoderKLQwenImage21, QwenImage21Transformer2DModel
from safetensors.torch import load_file, save_file

from nodes.arch import latent_format
from nodes.loaders import make_ref
from nodes.models import loader
from nodes.models.detect import QWEN_IMAGE21_KEYS, classify, probe
from nodes.models.errors import ModelLoadError
from nodes.models.qwen_image21 import joint_layout, to_diffusers_layout
from nodes.models.safetensors_io import shapes_of

CONFIG = {
    "in_channels": 64,
    "out_channels": 64,
    "num_layers": 2,
    "attention_head_dim": 128,
    "num_attention_heads": 1,
    "context_in_dim": 16,
    "mlp_ratio": 3,
}


@pytest.fixture(scope="module")
def reference() -> QwenImage21Transformer2DModel:
    """diffusers' model with every weight random (its zero-initialised norms would hide a mix-up)."""
    torch.manual_seed(0)
    model = QwenImage21Transformer2DModel(**CONFIG).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.2)
    return model


def comfy_layout(sd: dict[str, torch.Tensor], prefix: str = "model.diffusion_model.") -> dict[str, torch.Tensor]:
    """ComfyUI's saved layout: gate and up projections fused into img_mlp.gate_up, gate rows first."""
    out = {}
    for key, value in sd.items():
        if key.endswith("img_mlp.proj.weight"):
            continue
        if key.endswith("img_mlp.gate_layer.weight"):
            up = sd[key.replace("gate_layer", "proj")]
            key, value = key.replace("gate_layer", "gate_up"), torch.cat([value, up])
        out[prefix + key] = value.contiguous()
    return out


@pytest.fixture(scope="module")
def files(reference, tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("qwen21")
    sd = reference.state_dict()
    paths = {"comfy": folder / "qwen_image_2.1_tiny.safetensors", "split": folder / "qwen_image_2.1_split.safetensors"}
    save_file(comfy_layout(sd), str(paths["comfy"]))
    save_file({k: v.contiguous() for k, v in sd.items()}, str(paths["split"]))
    return paths


@pytest.fixture(scope="module")
def model(files):
    torch.set_num_threads(1)
    return loader.load_diffusion_model(make_ref("diffusion_model", "qwen_image21", [files["comfy"]]))


def test_both_layouts_are_detected_as_comfyui_detects_them(files) -> None:
    comfy, split = probe(files["comfy"]), probe(files["split"])
    assert (comfy.arch, comfy.kind, comfy.layout, comfy.prefix) == (
        "qwen_image21",
        "diffusion_model",
        "comfy",
        "model.diffusion_model.",
    )
    assert (split.arch, split.layout, split.prefix) == ("qwen_image21", "diffusers", "")


@pytest.mark.parametrize("missing", [*QWEN_IMAGE21_KEYS, "img_mlp"])
def test_a_file_lacking_any_key_of_comfyuis_rule_is_not_qwen_image21(files, missing) -> None:
    shapes, _ = shapes_of(files["comfy"])
    shapes = {k: v for k, v in shapes.items() if not k.endswith(missing if missing != "img_mlp" else "gate_up.weight")}
    try:
        assert classify(shapes, "x").arch != "qwen_image21"
    except ModelLoadError:
        pass  # unknown architecture: also not taken for 2.1


def test_the_gate_up_split_puts_gate_rows_first(files, reference) -> None:
    sd = to_diffusers_layout(load_file(str(files["comfy"])))
    ref = reference.state_dict()
    assert sd.keys() == ref.keys()
    assert all(torch.equal(sd[k], ref[k]) for k in ref)


def test_config_is_read_from_the_shapes(model, files) -> None:
    assert {k: model.config[k] for k in CONFIG} == CONFIG
    split = loader.load_diffusion_model(make_ref("diffusion_model", "qwen_image21", [files["split"]]))
    assert split.config == model.config


def test_latent_format_is_diffusers_vae_statistics() -> None:
    defaults = inspect.signature(AutoencoderKLQwenImage21.__init__).parameters
    fmt = latent_format("qwen_image21")
    assert fmt.channels == 64
    assert list(fmt.latents_mean) == defaults["latents_mean"].default
    assert list(fmt.latents_std) == defaults["latents_std"].default


def assert_float32_close(ours: torch.Tensor, expected: torch.Tensor) -> None:
    """Equal up to float32 rounding: the random weights drive activations to tens, so the bound is relative to
    the largest output (measured: 1.7e-6 of it)."""
    assert ours.shape == expected.shape
    assert (ours - expected).abs().max() <= 1e-5 * expected.abs().max()


def diffusers_step(reference, x, sigma, context, refs=(), slot=None) -> torch.Tensor:
    """diffusers' forward with the inputs laid out as its pipeline does: each reference takes h*w/4 vision slots
    at `slot` in the text (placeholder rows, replaced by its latents), the target's slots follow the text."""
    b, _, h, w = x.shape
    ehs, mask = context, [False] * context.shape[1]
    shapes, latents = [], []
    for r in refs:
        n = r.shape[-2] * r.shape[-1] // 4
        ehs = torch.cat([ehs[:, :slot], torch.zeros(b, n, ehs.shape[2]), ehs[:, slot:]], dim=1)
        mask = mask[:slot] + [True] * n + mask[slot:]
        shapes.append((1, r.shape[-2], r.shape[-1]))
        latents.append(r.flatten(2).mT)
    mask += [True] * (h * w // 4)
    img_mask = torch.tensor([mask] * b)
    hidden = torch.cat([*latents, x.flatten(2).mT], dim=1)
    with torch.no_grad():
        out = reference(
            hidden_states=hidden,
            encoder_hidden_states=ehs,
            timestep=sigma.expand(b),
            img_shapes=[shapes + [(1, h, w)]] * b,
            img_mask=img_mask,
            return_dict=False,
        )[0]
    return out[:, -h * w :].mT.reshape(b, -1, h, w)


@pytest.mark.parametrize("size", [(4, 6), (6, 4)])
def test_text_to_image_step_equals_diffusers(model, reference, size) -> None:
    torch.manual_seed(1)
    x, context, sigma = torch.randn(2, 64, *size), torch.randn(2, 7, 16), torch.tensor([0.63])
    with torch.no_grad():
        ours = model.apply(x, sigma, {"context": context})
    expected = diffusers_step(reference, x, sigma, context)
    assert ours.shape == x.shape
    assert_float32_close(ours, expected)


def test_reference_spliced_at_its_slot_equals_diffusers(model, reference) -> None:
    torch.manual_seed(2)
    x, context, sigma = torch.randn(1, 64, 4, 4), torch.randn(1, 9, 16), torch.tensor([0.4])
    ref = torch.randn(1, 64, 2, 6)
    with torch.no_grad():
        ours = model.apply(x, sigma, {"context": context, "ref_latents": [ref], "image_slots": [3]})
        without = model.apply(x, sigma, {"context": context})
    assert_float32_close(ours, diffusers_step(reference, x, sigma, context, [ref], 3))
    assert (ours - without).abs().max() > 1e-3  # the reference really conditions the step


def test_odd_grids_run_where_diffusers_pairing_cannot() -> None:
    """ComfyUI's model takes any latent grid (1080 px / 16 = 67.5 -> 67 cells); the layout centres an odd grid
    with whole positions and a reference of the other parity half a cell off."""
    parts, pos, segments = joint_layout(3, [(2, 2)], [1], (3, 5))
    assert parts == [("text", 0, 1), ("image", 0, 4), ("text", 1, 3), ("image", 1, 15)]
    assert segments == [(0, 1, True), (1, 5, False), (5, 7, True)]
    assert pos[1].tolist() == [1.0, -1.5, -1.5]  # reference: frame 1, half a cell off the odd target
    assert pos[5].tolist() == [3.0, 3.0, 3.0]  # text after the reference: 1 + max(2, 2)
    assert pos[7].tolist() == [5.0, -2.0, -3.0]  # target: first row -(3 - 1), first column -(5 - 2)


def test_odd_target_step_runs(model) -> None:
    x = torch.randn(1, 64, 3, 5)
    with torch.no_grad():
        out = model.apply(x, torch.tensor([0.5]), {"context": torch.randn(1, 4, 16)})
    assert out.shape == x.shape and torch.isfinite(out).all()


def test_loras_are_refused_by_name(files) -> None:
    ref = make_ref("diffusion_model", "qwen_image21", [files["comfy"]])
    ref = ref.__class__(**{**ref.__dict__, "patches": (("lora.safetensors", 1.0),)})
    with pytest.raises(ModelLoadError, match="LoRAs are not supported for Qwen-Image 2.1"):
        loader.load_diffusion_model(ref)


# ---- the text encoder (Qwen3-VL's language model) --------------------------------------------------------------


def tiny_qwen3vl(seed: int = 0):
    """A tiny Qwen3-VL whose vision tower has ComfyUI's 16 heads (tests/models/test_qwen3vl_vision.py)."""
    from tests.models.test_qwen3vl_vision import tiny_qwen3vl as tiny

    return tiny(seed)


@pytest.fixture(scope="module")
def text_files(tmp_path_factory):
    model = tiny_qwen3vl()
    path = tmp_path_factory.mktemp("qwen3vl") / "qwen3vl_8b_tiny.safetensors"
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path))
    return model, path


def diffusers_prompt_embeds(model, tokenizer, prompt: str) -> torch.Tensor:
    """QwenImage21Pipeline's own prompt encoding (text-to-image) run on the tiny model, its processor standing
    in with Qwen2's tokenizer and the system turn's token count."""
    from diffusers import QwenImage21Pipeline
    from transformers import BatchEncoding

    from nodes.models.qwen_image21_text import SYSTEM

    class Processor:
        def __call__(self, text, **_):
            ids = torch.tensor([tokenizer.encode(t) for t in text])
            return BatchEncoding({"input_ids": ids, "attention_mask": torch.ones_like(ids)})

    pipe = object.__new__(QwenImage21Pipeline)
    pipe.__dict__.update(
        text_encoder=model,
        processor=Processor(),
        _drop_idx=len(tokenizer.encode(SYSTEM)),
        _img_token_id=151655,
        sys_prompt="Comprehend and analyze the provided prompt.",
    )
    pipe.prompt_template_t2i = (
        "<|im_start|>system\nComprehend and analyze the provided prompt.<|im_end|>\n"
        "<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n"
    )
    with torch.no_grad():
        embeds, _, _ = pipe._get_qwen_prompt_embeds(prompt, device=torch.device("cpu"))
    return embeds


def test_qwen3vl_file_is_detected_by_comfyuis_rule(text_files) -> None:
    _, path = text_files
    info = probe(path)
    assert (info.arch, info.kind) == ("qwen3vl", "text_encoder")
    with pytest.raises(ModelLoadError, match="only as Qwen-Image 2.1's"):
        loader.load_text_encoder(make_ref("text_encoder", "qwen_image21", [path], clip_type="lumina2"))


@pytest.mark.parametrize("prompt", ["a red fox in the snow", ""])
def test_prompt_encoding_equals_the_diffusers_pipeline(text_files, prompt) -> None:
    model, path = text_files
    te = loader.load_text_encoder(make_ref("text_encoder", "qwen_image21", [path], clip_type="qwen_image"))
    ours, pooled = te.encode(te.tokenize(prompt))
    expected = diffusers_prompt_embeds(model, te.tokenizer, prompt)
    assert pooled is None
    assert ours.shape == expected.shape
    torch.testing.assert_close(ours, expected, rtol=0, atol=1e-5)
