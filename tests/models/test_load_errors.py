"""Every load failure is one ModelLoadError that names the file and the problem."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import save_file

from nodes.models.errors import ModelLoadError
from nodes.models.loader import load_controlnet, load_diffusion_model, load_text_encoder, load_vae, probe
from nodes.models.safetensors_io import load_state_dict


def _copy_without(src, dst, drop: str) -> None:
    sd = dict(load_state_dict(src))
    del sd[drop]
    save_file(sd, str(dst))


def test_truncated_file(sd_models, tmp_path, make_ref):
    data = (sd_models / "checkpoints/sd1-tiny.safetensors").read_bytes()
    f = tmp_path / "cut.safetensors"
    f.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelLoadError, match="truncated") as e:
        load_diffusion_model(make_ref("diffusion_model", str(f)))
    assert str(f) in str(e.value)


def test_not_a_safetensors_file(tmp_path):
    f = tmp_path / "notes.safetensors"
    f.write_text("hello, this is not a model")
    with pytest.raises(ModelLoadError, match="not a safetensors file"):
        probe(f)


def test_unknown_architecture(tmp_path):
    f = tmp_path / "odd.safetensors"
    save_file({"foo.bar.weight": torch.zeros(3)}, str(f))
    with pytest.raises(ModelLoadError, match="unknown model architecture"):
        probe(f)


@pytest.mark.parametrize(
    "component, key, load",
    [
        ("diffusion_model", "model.diffusion_model.input_blocks.1.1.proj_out.weight", load_diffusion_model),
        ("vae", "first_stage_model.decoder.up.0.block.0.conv1.weight", load_vae),
        ("text_encoder", "cond_stage_model.transformer.text_model.encoder.layers.1.mlp.fc2.weight", load_text_encoder),
    ],
)
def test_missing_tensor_names_it(sd_models, tmp_path, make_ref, component, key, load):
    f = tmp_path / "missing.safetensors"
    _copy_without(sd_models / "checkpoints/sd1-tiny.safetensors", f, key)
    with pytest.raises(ModelLoadError, match="missing") as e:
        load(make_ref(component, str(f)))
    assert str(f) in str(e.value) and "meta" not in str(e.value)


def test_wrong_component_file(sd_models, make_ref):
    with pytest.raises(ModelLoadError, match="holds no diffusion model"):
        load_diffusion_model(make_ref("diffusion_model", "vae/sd1-tiny-vae.safetensors"))
    with pytest.raises(ModelLoadError, match="not a ControlNet"):
        load_controlnet(make_ref("controlnet", "checkpoints/sd1-tiny.safetensors"))


def test_lora_for_another_architecture(sd_models, make_ref):
    lora = "loras/sd1-tiny-lora.safetensors"
    with pytest.raises(ModelLoadError, match="another architecture") as e:
        load_diffusion_model(make_ref("diffusion_model", "checkpoints/sdxl-tiny.safetensors", loras=[(lora, 1.0)]))
    assert "sd1-tiny-lora" in str(e.value)
    with pytest.raises(ModelLoadError, match="another architecture"):
        load_text_encoder(make_ref("text_encoder", "checkpoints/sdxl-tiny.safetensors", loras=[(lora, 1.0)]))


def test_lora_with_wrong_shapes(sd_models, tmp_path, make_ref):
    sd = {k: v for k, v in load_state_dict(sd_models / "loras/sd1-tiny-lora.safetensors").items()}
    key = next(k for k in sd if k.startswith("lora_unet_") and k.endswith("attn2_to_k.lora_down.weight"))
    sd[key] = torch.zeros(sd[key].shape[0], sd[key].shape[1] + 1, dtype=sd[key].dtype)
    f = tmp_path / "bad-lora.safetensors"
    save_file(sd, str(f))
    ref = make_ref("diffusion_model", "checkpoints/sd1-tiny.safetensors", loras=[(str(f), 1.0)])
    with pytest.raises(ModelLoadError, match="shape") as e:
        load_diffusion_model(ref)
    assert str(f) in str(e.value)


def test_a_checkpoint_is_not_a_lora(sd_models, make_ref):
    ref = make_ref("diffusion_model", "checkpoints/sd1-tiny.safetensors", loras=[("vae/sd1-tiny-vae.safetensors", 1.0)])
    with pytest.raises(ModelLoadError, match="not a LoRA"):
        load_diffusion_model(ref)
