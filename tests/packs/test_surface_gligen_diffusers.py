"""Names today's packs import that were missing (issue 33): comfy.gligen (ComfyUI-TiledDiffusion patches
Gligen._set_position at import), comfy.diffusers_load (ComfyUI_ExtraModels' MiaoBi loader), comfy.model_base.Anima,
comfy.ldm.cosmos.predict2.Attention and comfy.samplers.process_conds (comfyui-tooling-nodes' regions)."""

from __future__ import annotations

import pytest
import torch

from comfy_bridge.compat import install
from comfy_bridge.packs.origin import UnsupportedFeature
from comfy_bridge.packs.proxies import wrap
from nodes.library.legacy_loaders import DiffusersLoader
from tests.nodes.test_legacy_loaders import diffusers_folders  # noqa: F401  (fixture)

install()
import comfy.diffusers_load
import comfy.gligen
import comfy.model_base
import comfy.samplers
from comfy.ldm.cosmos.predict2 import Attention as CosmosAttention


def test_fourier_embedder_is_sin_and_cos_per_frequency():
    emb = comfy.gligen.FourierEmbedder(num_freqs=3, temperature=100)
    x = torch.tensor([[0.25, 0.5]])
    freqs = [100 ** (i / 3) for i in range(3)]
    expected = torch.cat([f(torch.tensor(freq) * x) for freq in freqs for f in (torch.sin, torch.cos)], -1)
    assert torch.allclose(emb(x), expected)
    assert emb(x).shape == (1, 12)


def _initialised(module: torch.nn.Module) -> torch.nn.Module:
    for p in module.parameters():
        torch.nn.init.normal_(p, std=0.02)
    return module


def test_closed_gates_leave_the_input_and_open_ones_change_it():
    torch.manual_seed(0)
    x, objs = torch.randn(2, 16, 32), torch.randn(2, 30, 24)
    for cls in (comfy.gligen.GatedSelfAttentionDense, comfy.gligen.GatedCrossAttentionDense):
        block = _initialised(cls(32, 24, 4, 8))  # ComfyUI's ops leave weights uninitialised until loaded
        with torch.no_grad():
            block.alpha_attn.zero_(), block.alpha_dense.zero_()
        assert torch.equal(block(x, objs), x)  # closed gates: the block leaves its input unchanged
        with torch.no_grad():
            block.alpha_attn.fill_(1.0)
        assert not torch.allclose(block(x, objs), x)
    square = _initialised(comfy.gligen.GatedSelfAttentionDense2(32, 24, 4, 8))
    assert square(x, torch.randn(2, 25, 24)).shape == x.shape
    with pytest.raises(ValueError, match="must be square numbers"):
        square(x, objs)


def _checkpoint() -> tuple[dict, torch.nn.Module, torch.nn.Module]:
    """A GLIGEN state dict in the checkpoint's key layout, from modules with random weights."""
    torch.manual_seed(1)
    block = _initialised(comfy.gligen.GatedSelfAttentionDense(64, 768, 8, 8))
    net = _initialised(comfy.gligen.PositionNet(768, 768))
    sd = {f"input_blocks.1.1.transformer_blocks.0.fuser.{k}": v for k, v in block.state_dict().items()}
    sd |= {f"position_net.{k}": v for k, v in net.state_dict().items()}
    return sd, block, net


def test_load_gligen_builds_the_blocks_and_position_net_of_a_state_dict():
    sd, block, net = _checkpoint()
    gligen = comfy.gligen.load_gligen(sd)
    assert len(gligen.module_list) == 1 and gligen.key_dim == 768
    assert gligen.module_list[0].attn.heads == 8  # SD1's key width: 8 heads
    for name, value in block.state_dict().items():
        assert torch.equal(gligen.module_list[0].state_dict()[name], value)
    boxes, masks, text = torch.rand(1, 30, 4), torch.ones(1, 30), torch.randn(1, 30, 768)
    assert torch.equal(gligen.position_net(boxes, masks, text), net(boxes, masks, text))
    with pytest.raises(ValueError, match="no position_net"):
        comfy.gligen.load_gligen({k: v for k, v in sd.items() if not k.startswith("position_net.")})


def test_set_position_normalises_boxes_to_the_latent_and_pads_to_max_objs(monkeypatch):
    sd, _, _ = _checkpoint()
    gligen = comfy.gligen.load_gligen(sd)
    seen = {}

    def spy(self, boxes, masks, positive_embeddings):  # what TiledDiffusion replaces at import
        seen.update(boxes=boxes, masks=masks, text=positive_embeddings)
        return "patch"

    monkeypatch.setattr(comfy.gligen.Gligen, "_set_position", spy)
    text = torch.randn(1, 768)
    # (embedding, height, width, y, x) in latent pixels, as GLIGENTextBoxApply stores them
    assert gligen.set_position((2, 4, 8, 16), [(text, 4, 2, 1, 3)], "cpu") == "patch"
    assert seen["boxes"].shape == (2, 30, 4) and seen["masks"].shape == (2, 30)
    assert torch.allclose(seen["boxes"][0, 0], torch.tensor([3 / 16, 1 / 8, 5 / 16, 5 / 8]))
    assert seen["masks"][0].tolist() == [1.0] + [0.0] * 29
    assert torch.equal(seen["text"][1, 0], text[0]) and not seen["text"][:, 1:].any()
    gligen.set_empty((2, 4, 8, 8), "cpu")
    assert not seen["masks"].any() and seen["text"].shape == (2, 30, 768)


def test_set_position_patch_runs_the_transformers_block():
    sd, _, _ = _checkpoint()
    gligen = comfy.gligen.load_gligen(sd)
    with torch.no_grad():
        gligen.module_list[0].alpha_attn.fill_(0.5)
    patch = gligen.set_position((1, 4, 8, 8), [(torch.randn(1, 768), 4, 4, 0, 0)], "cpu")
    x = torch.randn(1, 64, 64)
    assert patch(x, {"transformer_index": 0}).shape == x.shape
    assert not torch.equal(patch(x, {"transformer_index": 0}), x)


def test_load_diffusers_gives_what_the_diffusers_loader_node_gives(demo_workspace, diffusers_folders):  # noqa: F811
    folder = demo_workspace.models_dir / "diffusers" / "sd1-tiny"
    assert comfy.diffusers_load.load_diffusers(str(folder)) == tuple(
        wrap(ref) for ref in DiffusersLoader().load_checkpoint("sd1-tiny")
    )
    unet, clip, vae = comfy.diffusers_load.load_diffusers(str(folder), output_vae=False, output_clip=False)
    assert type(unet).__name__ == "ModelPatcher" and clip is None and vae is None
    assert comfy.diffusers_load.first_file(str(folder / "unet"), ["nope.bin", "config.json"]) == str(
        folder / "unet" / "config.json"
    )
    with pytest.raises(FileNotFoundError, match="is not a diffusers folder"):
        comfy.diffusers_load.load_diffusers(str(folder / "missing"))


def test_anima_and_cosmos_names_exist_and_refuse_to_build():
    assert issubclass(comfy.model_base.Anima, comfy.model_base.BaseModel)
    with pytest.raises(UnsupportedFeature, match=r"comfy\.model_base\.Anima"):
        comfy.model_base.Anima()
    with pytest.raises(UnsupportedFeature, match=r"comfy\.ldm\.cosmos\.predict2\.Attention"):
        CosmosAttention()
    with pytest.raises(UnsupportedFeature, match=r"comfy\.samplers\.process_conds"):
        comfy.samplers.process_conds(None, torch.zeros(1, 4, 8, 8), {}, "cpu")
