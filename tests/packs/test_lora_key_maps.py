"""comfy.lora.model_lora_keys_unet / model_lora_keys_clip as packs call them (Inspire's LoRA Block Weight, KJNodes'
and Easy-Use's LoRA loaders: `key_map = model_lora_keys_unet(model.model, {})`, then `load_lora(lora, key_map)`),
and MODEL.model.state_dict() in ComfyUI's names.

The recorded fingerprints (entry count, first 16 hex digits of sha256 over json.dumps(sorted(key_map.items())))
were made by running ComfyUI 0.3.64's own model_lora_keys_unet / model_lora_keys_clip (Comfy-Org/ComfyUI
a125cd84b0, comfy/lora.py and comfy/utils.py) on the same state-dict keys and unet_config."""

from __future__ import annotations

import hashlib
import json
import logging

import pytest
import torch

from comfy_bridge.compat.comfy import lora

# (arch, checkpoint) -> (entries, fingerprint) of ComfyUI's model_lora_keys_unet
UNET_RECORDED = {
    ("sd1", "sd1-tiny.safetensors"): (824, "a1c4a9de105fc74c"),
    ("sdxl", "sdxl-tiny.safetensors"): (1170, "154736721d048eb9"),
}
PARTS = (
    "self_attn.q_proj",
    "self_attn.k_proj",
    "self_attn.v_proj",
    "self_attn.out_proj",
    "mlp.fc1",
    "mlp.fc2",
    "layer_norm1",
    "layer_norm2",
)
T5 = [f"t5xxl.transformer.encoder.block.{b}.layer.0.SelfAttention.{x}.weight" for b in range(2) for x in "qkvo"] + [
    "t5xxl.transformer.shared.weight"
]


def _fingerprint(key_map: dict) -> tuple[int, str]:
    return len(key_map), hashlib.sha256(json.dumps(sorted(key_map.items())).encode()).hexdigest()[:16]


def _tower(name: str, layers: int) -> list[str]:
    keys = [
        f"{name}.transformer.text_model.embeddings.token_embedding.weight",
        f"{name}.transformer.text_model.final_layer_norm.weight",
        f"{name}.transformer.text_projection.weight",
    ]
    for b in range(layers):
        for p in PARTS:
            keys += [f"{name}.transformer.text_model.encoder.layers.{b}.{p}.{w}" for w in ("weight", "bias")]
    return keys


class TextEncoder(torch.nn.Module):
    """A cond_stage_model whose state dict has these keys (as ComfyUI's SD1/SDXL/Flux/SD3 CLIP models name them)."""

    def __init__(self, keys: list[str]) -> None:
        super().__init__()
        for k in keys:
            self.register_buffer(k.replace(".", "__"), torch.zeros(1))
        self.keys = keys

    def state_dict(self, *args, **kwargs) -> dict:
        return {k: torch.zeros(1) for k in self.keys}


@pytest.fixture
def models(demo_workspace):
    from comfy_bridge.packs.proxies import wrap
    from nodes.loaders import CheckpointLoaderSimple

    return {ckpt: wrap(CheckpointLoaderSimple().load_checkpoint(ckpt)[0]) for _, ckpt in UNET_RECORDED}


@pytest.mark.parametrize(("arch", "ckpt"), list(UNET_RECORDED))
def test_unet_key_map_is_comfyuis(models, arch, ckpt):
    from comfy_bridge.compat.comfy.utils import load_torch_file

    model = models[ckpt]
    assert model.arch == arch
    # MODEL.model.state_dict(): the checkpoint's network weights under BaseModel's names, the tensors themselves
    (path,) = model.sources
    stored = load_torch_file(path)
    sd = model.model.state_dict()
    want = {"diffusion_model." + k[len("model.diffusion_model.") :] for k in stored if k.startswith("model.diffusion_")}
    assert set(sd) == want
    name = "diffusion_model.input_blocks.0.0.weight"
    torch.testing.assert_close(sd[name], stored["model." + name])

    given = {"kept": "as it was"}
    key_map = lora.model_lora_keys_unet(model.model, given)
    assert key_map is given and key_map.pop("kept") == "as it was"  # updated in place, as ComfyUI's
    assert _fingerprint(key_map) == UNET_RECORDED[(arch, ckpt)]


def test_unet_key_map_names_the_formats_comfyui_reads(models):
    model = models["sd1-tiny.safetensors"].model
    # ComfyUI's unet_config of this UNet: levels of one res block, attention on the first level and in the middle;
    # the output side listed from the shallowest level up (as ComfyUI's SD1.5 config ends in 0, 0, 0)
    assert model.model_config.unet_config == {
        "model_channels": 32,
        "num_res_blocks": [1, 1],
        "channel_mult": [1, 2],
        "transformer_depth": [1, 0],
        "transformer_depth_output": [1, 1, 0, 0],
        "transformer_depth_middle": 1,
    }
    key_map = lora.model_lora_keys_unet(model)
    q = "diffusion_model.input_blocks.1.1.transformer_blocks.0.attn1.to_q.weight"
    out = "diffusion_model.input_blocks.1.1.transformer_blocks.0.attn1.to_out.0.weight"
    diffusers = "down_blocks.0.attentions.0.transformer_blocks.0.attn1"
    assert key_map["lora_unet_input_blocks_1_1_transformer_blocks_0_attn1_to_q"] == q  # kohya, LDM paths (SDXL)
    assert key_map[f"lora_unet_{diffusers.replace('.', '_')}_to_q"] == q  # kohya, diffusers paths (SD1)
    assert key_map[f"lycoris_{diffusers.replace('.', '_')}_to_q"] == q
    assert key_map[f"unet.{diffusers}.processor.to_q"] == q and key_map[f"{diffusers}.processor.to_q"] == q
    assert key_map[f"{diffusers}.processor.to_out"] == out
    assert key_map[q[: -len(".weight")]] == q
    bias = "diffusion_model.input_blocks.0.0.bias"
    assert key_map[bias] == bias


def test_a_kohya_lora_loads_through_the_key_map(models, caplog):
    """Every module of a kohya LoRA for the model's attention layers becomes a patch on the weight it names."""
    model = models["sd1-tiny.safetensors"]
    sd = model.model.state_dict()
    targets = [k for k in sd if ".attn" in k and k.endswith(".weight")]
    lora_sd = {}
    for k in targets:
        name = "lora_unet_" + k[len("diffusion_model.") : -len(".weight")].replace(".", "_")
        out_f, in_f = sd[k].shape[0], sd[k].shape[1]
        lora_sd |= {f"{name}.lora_up.weight": torch.ones(out_f, 2), f"{name}.lora_down.weight": torch.ones(2, in_f)}
        lora_sd[f"{name}.alpha"] = torch.tensor(2.0)
    with caplog.at_level(logging.WARNING):
        patches = lora.load_lora(lora_sd, lora.model_lora_keys_unet(model.model, {}))
    assert sorted(patches) == sorted(targets) and "not loaded" not in caplog.text
    k = targets[0]
    weight = sd[k].float()
    patched = lora.calculate_weight([(0.5, patches[k], 1.0, None, None)], weight.clone(), k)
    # strength 0.5 * alpha / rank (2 / 2) * up @ down (all 2)
    torch.testing.assert_close(patched, weight + 1.0)


def test_the_demo_loras_unet_modules_all_load_through_the_key_map(models, demo_workspace, caplog):
    from safetensors.torch import load_file

    lora_sd = load_file(demo_workspace.models_dir / "loras" / "sd1-tiny-lora.safetensors")
    unet = {k: v for k, v in lora_sd.items() if k.startswith("lora_unet_")}
    assert unet
    with caplog.at_level(logging.WARNING):
        patches = lora.load_lora(unet, lora.model_lora_keys_unet(models["sd1-tiny.safetensors"].model, {}))
    modules = {k.split(".")[0] for k in unet}
    assert len(patches) == len(modules) and "not loaded" not in caplog.text
    assert set(patches) <= set(models["sd1-tiny.safetensors"].model.state_dict())


CLIP_RECORDED = {
    "sdxl": (_tower("clip_l", 2) + _tower("clip_g", 3), (121, "aece47c0583863af")),
    "flux": (_tower("clip_l", 2) + T5, (83, "ac1286d6b8dea2af")),
    "sd3": (_tower("clip_l", 2) + _tower("clip_g", 2) + T5, (119, "182fde8ace9761a3")),
    "sdxl refiner": (_tower("clip_g", 2), (57, "b09d7ad9700edaa0")),
}


@pytest.mark.parametrize("family", list(CLIP_RECORDED))
def test_clip_key_map_is_comfyuis(family):
    keys, recorded = CLIP_RECORDED[family]
    key_map = lora.model_lora_keys_clip(TextEncoder(keys), {})
    assert _fingerprint(key_map) == recorded


def test_clip_key_map_names_the_formats_comfyui_reads():
    sdxl = lora.model_lora_keys_clip(TextEncoder(_tower("clip_l", 1) + _tower("clip_g", 1)))
    q = "transformer.text_model.encoder.layers.0.self_attn.q_proj.weight"
    assert sdxl["lora_te1_text_model_encoder_layers_0_self_attn_q_proj"] == "clip_l." + q
    assert sdxl["lora_te2_text_model_encoder_layers_0_self_attn_q_proj"] == "clip_g." + q
    assert sdxl["text_encoder_2.text_model.encoder.layers.0.self_attn.q_proj"] == "clip_g." + q
    assert sdxl["lora_te2_text_projection"] == "clip_g.transformer.text_projection.weight"
    assert sdxl["text_encoders.clip_l.transformer.text_model.final_layer_norm"].endswith("final_layer_norm.weight")
    flux = lora.model_lora_keys_clip(TextEncoder(_tower("clip_l", 1) + T5))
    t5_q = "t5xxl.transformer.encoder.block.0.layer.0.SelfAttention.q.weight"
    # OneTrainer numbers T5 after the CLIP towers; with clip_l alone both te2 and te3 name it
    assert flux["lora_te2_encoder_block_0_layer_0_SelfAttention_q"] == t5_q
    assert flux["lora_te3_encoder_block_0_layer_0_SelfAttention_q"] == t5_q


def test_the_model_view_of_a_family_without_comfyuis_layout_here_refuses_by_name():
    from comfy_bridge.compat.comfy.model_state import diffusion_model_state
    from comfy_bridge.packs.origin import UnsupportedFeature

    with pytest.raises(UnsupportedFeature, match="MODEL.model.state_dict\\(\\) of a flux model"):
        diffusion_model_state("flux", ())


def _sample(model, positive, negative):
    import asyncio

    from nodes.ksampler import common_ksampler

    latent = {"samples": torch.zeros(1, 4, 8, 8)}
    (out,) = asyncio.run(common_ksampler(model, 5, 2, 4.0, "euler", "normal", positive, negative, latent))
    return out["samples"]


def test_add_patches_of_a_loaded_lora_samples_as_lora_loader(models, demo_workspace, fixed_threads):
    """Inspire's LoRA Block Weight and KJNodes' block LoRA loaders: key map, load_lora, then add_patches on a
    clone; sampling the clone equals LoraLoaderModelOnly with that LoRA at the same strength."""
    import asyncio

    from safetensors.torch import load_file

    from nodes.loaders import CheckpointLoaderSimple, LoraLoaderModelOnly
    from nodes.model_nodes import CLIPTextEncode

    _, clip, _ = CheckpointLoaderSimple().load_checkpoint("sd1-tiny.safetensors")
    enc = CLIPTextEncode()
    positive = asyncio.run(enc.encode(clip, "a red fox"))[0]
    negative = asyncio.run(enc.encode(clip, ""))[0]
    model = models["sd1-tiny.safetensors"]
    lora_sd = load_file(demo_workspace.models_dir / "loras" / "sd1-tiny-lora.safetensors")
    loaded = lora.load_lora(lora_sd, lora.model_lora_keys_unet(model.model, {}), log_missing=False)
    patched_model = model.clone()
    patched = patched_model.add_patches(loaded, 0.8)
    assert sorted(patched) == sorted(loaded) and len(patched) == 32
    assert model.patches == ()  # the clone was patched, in place; the original kept
    (want,) = LoraLoaderModelOnly().load_lora_model_only(model, "sd1-tiny-lora.safetensors", 0.8)
    torch.testing.assert_close(_sample(patched_model, positive, negative), _sample(want, positive, negative))
    assert not torch.allclose(_sample(patched_model, positive, negative), _sample(model, positive, negative))


def test_add_patches_refuses_what_a_lora_file_cannot_carry(models):
    from comfy_bridge.packs.origin import UnsupportedFeature

    model = models["sd1-tiny.safetensors"].clone()
    key = "diffusion_model.input_blocks.1.1.proj_in.weight"
    up, down = torch.ones(32, 2), torch.ones(2, 32)
    with pytest.raises(UnsupportedFeature, match="'diff' patch"):
        model.add_patches({key: ("diff", (torch.ones(32, 32),))})
    with pytest.raises(UnsupportedFeature, match="LoCon mid weight"):
        model.add_patches({key: ("lora", (up, down, None, torch.ones(2, 2, 1, 1), None, None))})
    assert model.add_patches({"diffusion_model.not_a_layer.weight": ("lora", (up, down, 1.0, None, None, None))}) == []
    assert model.patches == ()


def test_inspire_lora_block_weight_flow_on_model_and_clip(models, demo_workspace, fixed_threads):
    """Inspire's load_lbw: key maps of model.model and clip.cond_stage_model, load_lora, then add_patches on
    clones of both; the CLIP encodes and the MODEL samples as LoraLoader's at the same strengths."""
    import asyncio

    from safetensors.torch import load_file

    from comfy_bridge.packs.proxies import wrap
    from nodes.loaders import CheckpointLoaderSimple, LoraLoader
    from nodes.model_nodes import CLIPTextEncode

    _, clip, _ = CheckpointLoaderSimple().load_checkpoint("sd1-tiny.safetensors")
    clip = wrap(clip)
    model = models["sd1-tiny.safetensors"]
    te = clip.cond_stage_model.state_dict()
    assert {k for k in te if not k.startswith("clip_l.transformer.text_model.")} == {
        "clip_l.logit_scale",
        "clip_l.transformer.text_projection.weight",
    }
    assert "clip_l.transformer.text_model.encoder.layers.0.self_attn.q_proj.weight" in te
    key_map = lora.model_lora_keys_unet(model.model)
    key_map = lora.model_lora_keys_clip(clip.cond_stage_model, key_map)
    lora_sd = load_file(demo_workspace.models_dir / "loras" / "sd1-tiny-lora.safetensors")
    loaded = lora.load_lora(lora_sd, key_map, log_missing=False)
    assert len(loaded) == len({k.split(".")[0] for k in lora_sd}) == 44
    new_model, new_clip = model.clone(), clip.clone()
    assert len(new_model.add_patches(loaded, 0.8)) == 32
    assert sorted(new_clip.add_patches(loaded, 0.6)) == sorted(k for k in loaded if k.startswith("clip_l."))
    want_model, want_clip = LoraLoader().load_lora(model, clip, "sd1-tiny-lora.safetensors", 0.8, 0.6)

    def encode(c, text):
        return asyncio.run(CLIPTextEncode().encode(c, text))[0]

    got_pos, want_pos = encode(new_clip, "a red fox"), encode(want_clip, "a red fox")
    torch.testing.assert_close(got_pos[0][0], want_pos[0][0])
    assert not torch.allclose(got_pos[0][0], encode(clip, "a red fox")[0][0])
    negative = encode(want_clip, "")
    torch.testing.assert_close(_sample(new_model, got_pos, negative), _sample(want_model, want_pos, negative))


def test_sdxl_clip_view_has_both_towers_and_sdxl_lora_names(demo_workspace):
    from comfy_bridge.packs.proxies import wrap
    from nodes.loaders import CheckpointLoaderSimple

    _, clip, _ = CheckpointLoaderSimple().load_checkpoint("sdxl-tiny.safetensors")
    te = wrap(clip).cond_stage_model
    towers = {k.split(".")[0] for k in te.state_dict()}
    assert towers == {"clip_l", "clip_g"}
    key_map = lora.model_lora_keys_clip(te)
    q = "transformer.text_model.encoder.layers.0.self_attn.q_proj.weight"
    assert key_map["lora_te1_text_model_encoder_layers_0_self_attn_q_proj"] == "clip_l." + q
    assert key_map["lora_te2_text_model_encoder_layers_0_self_attn_q_proj"] == "clip_g." + q
