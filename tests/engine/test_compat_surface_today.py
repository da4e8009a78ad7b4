"""Names today's packs import from ComfyUI's modules (issue 33): each exists and behaves as ComfyUI's, or,
where it needs ComfyUI's in-process model objects, raises UnsupportedFeature naming the call."""

from __future__ import annotations

import hashlib
import importlib
import json
from fractions import Fraction

import pytest
import torch

from comfy_bridge import compat
from comfy_bridge.packs.origin import UnsupportedFeature

compat.import_as_comfyui_has()

SD15_UNET = dict(
    num_res_blocks=[2, 2, 2, 2],
    channel_mult=[1, 2, 4, 4],
    transformer_depth=[1, 1, 1, 1, 1, 1, 0, 0],
    transformer_depth_output=[0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1],
    transformer_depth_middle=1,
)
SDXL_UNET = dict(
    num_res_blocks=[2, 2, 2],
    channel_mult=[1, 2, 4],
    transformer_depth=[0, 0, 2, 2, 10, 10],
    transformer_depth_output=[0, 0, 0, 2, 2, 2, 10, 10, 10],
    transformer_depth_middle=10,
)


def _digest(mapping: dict) -> str:
    return hashlib.sha256(json.dumps(sorted(mapping.items())).encode()).hexdigest()[:16]


def test_unet_key_maps_are_comfyuis():
    import comfy.utils as u

    assert len(u.UNET_MAP_ATTENTIONS) == 6 and "proj_in.weight" in u.UNET_MAP_ATTENTIONS
    assert len(u.TRANSFORMER_BLOCKS) == 20 and "attn2.to_out.0.bias" in u.TRANSFORMER_BLOCKS
    assert u.UNET_MAP_RESNET["skip_connection.weight"] == "conv_shortcut.weight" and len(u.UNET_MAP_RESNET) == 12
    assert ("label_emb.0.0.weight", "add_embedding.linear_1.weight") in u.UNET_MAP_BASIC and len(u.UNET_MAP_BASIC) == 18
    # Digests of ComfyUI 0.3.64's unet_to_diffusers for these configs (computed with its own function).
    sd15, sdxl = u.unet_to_diffusers(SD15_UNET), u.unet_to_diffusers(SDXL_UNET)
    assert (len(sd15), _digest(sd15)) == (714, "11341ae2e3e0bb31")
    assert (len(sdxl), _digest(sdxl)) == (1700, "7715a16e33522f4b")
    assert sdxl["up_blocks.0.upsamplers.0.conv.weight"] == "output_blocks.2.2.conv.weight"
    assert u.unet_to_diffusers({}) == {}


def test_utils_state_dict_and_latent_helpers():
    import comfy.utils as u

    sd = {"a.w": torch.zeros(2, 3, dtype=torch.float16), "a.b": torch.zeros(3), "b.w": torch.zeros(10)}
    assert u.calculate_parameters(sd, "a.") == 9 and u.weight_dtype(sd, "a.") == torch.float16
    assert u.weight_dtype(sd, "zzz") is None
    packed, shapes = u.pack_latents([torch.ones(1, 4, 2, 2), torch.full((1, 2, 3), 2.0)])
    assert packed.shape == (1, 1, 22)
    back = u.unpack_latents(packed, shapes)
    assert [t.shape for t in back] == [(1, 4, 2, 2), (1, 2, 3)] and back[1].eq(2).all()
    layer = torch.nn.Linear(2, 2)
    u.set_attr_param(layer, "bias", torch.ones(2))
    assert isinstance(layer.bias, torch.nn.Parameter) and not layer.bias.requires_grad


def test_model_management_names():
    import comfy.model_management as mm

    cpu = torch.device("cpu")
    assert mm.unet_manual_cast(torch.float32, cpu) is None
    assert mm.unet_manual_cast(torch.float16, cpu) == torch.float32  # no fp16 compute on a CPU
    assert mm.is_intel_xpu() is False and mm.is_directml_enabled() is False
    assert mm.dtype_size(torch.bfloat16) == 2 and mm.device_supports_non_blocking(cpu)
    assert mm.intermediate_dtype() == torch.float32 and mm.in_training is False
    t = torch.ones(2)
    assert mm.cast_to(t) is t and mm.cast_to(t, torch.float16).dtype == torch.float16


def test_ops_offloadable_cast_and_uncast():
    import comfy.ops

    layer = comfy.ops.manual_cast.Linear(2, 3)
    weight, bias, stream = comfy.ops.cast_bias_weight(layer, torch.zeros(1, 2, dtype=torch.float64), offloadable=True)
    assert weight.dtype == torch.float64 and stream is None
    assert comfy.ops.uncast_bias_weight(layer, weight, bias, stream) is None
    assert comfy.ops.cast_to(torch.ones(1), torch.float16).dtype == torch.float16


def test_sd_clip_type_and_load_checkpoint():
    import comfy.sd

    assert comfy.sd.CLIPType.FLUX.value == 6 and comfy.sd.CLIPType["QWEN_IMAGE"].value == 18
    with pytest.raises(ValueError, match="comfy.sd.load_checkpoint: ckpt_path is required"):
        comfy.sd.load_checkpoint(state_dict={})  # ComfyUI reads the weights from ckpt_path only
    with pytest.raises(UnsupportedFeature, match="load_text_encoder_state_dicts with custom_operations"):
        comfy.sd.load_text_encoder_state_dicts([{}], model_options={"custom_operations": object})


def test_clip_vision_model_is_our_clip_vision_value():
    from comfy.clip_vision import ClipVisionModel

    from cluster.refs import ModelRef

    ref = ModelRef("clip_vision", "clip_vision", ("a.safetensors",), ("d",))
    assert isinstance(ref, ClipVisionModel) and not isinstance(ModelRef("vae", "sd15", (), ()), ClipVisionModel)
    with pytest.raises(UnsupportedFeature, match=r"ClipVisionModel\(json_config\)"):
        ClipVisionModel("config.json")


def test_ldm_modules_packs_import():
    from comfy.ldm.util import default, exists, instantiate_from_config

    assert exists(0) and not exists(None) and default(None, lambda: 3) == 3
    assert isinstance(instantiate_from_config({"target": "torch.nn.Identity"}), torch.nn.Identity)
    from comfy.ldm.modules.attention import SpatialTransformer, SpatialVideoTransformer

    assert issubclass(SpatialVideoTransformer, SpatialTransformer)
    with pytest.raises(UnsupportedFeature, match="comfy.ldm.modules.attention.SpatialVideoTransformer"):
        SpatialVideoTransformer(4, 1, 4)
    from comfy.ldm.lightricks.model import apply_rotary_emb

    x = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    cos, sin = torch.zeros(1, 4), torch.ones(1, 4)
    assert apply_rotary_emb(x, (cos, sin)).tolist() == [[-2.0, 1.0, -4.0, 3.0]]
    from comfy.ldm.lightricks.vae.pixel_norm import PixelNorm

    assert torch.allclose(PixelNorm()(torch.full((1, 4, 1, 1), 2.0)), torch.ones(1, 4, 1, 1))
    from comfy.ldm.wan.vae import CausalConv3d, RMS_norm

    conv = CausalConv3d(2, 3, 3, padding=1)
    assert conv(torch.zeros(1, 2, 4, 5, 5)).shape == (1, 3, 4, 5, 5)  # time padded on the past side only
    assert torch.allclose(RMS_norm(4)(torch.full((1, 4, 2, 2), 3.0)), torch.ones(1, 4, 2, 2))
    for name in (
        "comfy.ldm.lumina.model.FeedForward",
        "comfy.ldm.wan.model.WanI2VCrossAttention",
        "comfy.ldm.modules.diffusionmodules.model.ResnetBlock",
        "comfy.ldm.lightricks.vae.causal_video_autoencoder.Decoder",
    ):
        module, cls = name.rsplit(".", 1)
        with pytest.raises(UnsupportedFeature, match=name.replace(".", r"\.")):
            getattr(importlib.import_module(module), cls)()


def test_taesd_layers_build_comfyuis_network():
    from comfy.taesd.taesd import Decoder, Encoder

    torch.manual_seed(0)
    dec = Decoder(4)
    # ComfyUI's state dict layout: 3.conv.0.weight is the first Block's first conv (Clamp, conv, ReLU first).
    assert dec.state_dict()["3.conv.0.weight"].shape == (64, 64, 3, 3) and len(dec) == 20
    assert dec(torch.zeros(1, 4, 8, 8)).shape == (1, 3, 64, 64)
    assert Encoder(4)(torch.zeros(1, 3, 64, 64)).shape == (1, 4, 8, 8)


def test_context_windows_names():
    import comfy.context_windows as cw

    assert cw.get_matching_fuse_method("pyramid").func(5) == [1, 2, 3, 2, 1]
    schedule = cw.get_matching_context_schedule("standard_uniform")
    handler = cw.IndexListContextHandler(
        schedule,
        cw.get_matching_fuse_method("flat"),
        context_length=16,
        context_overlap=4,
        cond_retain_index_list="0, 2",
    )
    assert handler.cond_retain_index_list == [0, 2]
    with pytest.raises(ValueError, match="Unknown context_schedule"):
        cw.get_matching_context_schedule("nope")
    with pytest.raises(TypeError, match="create_prepare_sampling_wrapper: the MODEL's model_options"):
        cw.create_prepare_sampling_wrapper(None)


def test_quant_ops_as_comfyui_without_or_with_comfy_kitchen():
    import comfy.quant_ops as q

    assert q.QUANT_ALGOS["float8_e4m3fn"]["comfy_tensor_layout"] == "TensorCoreFP8E4M3Layout"
    assert q.TensorCoreFP8Layout is q.TensorCoreFP8E4M3Layout
    try:
        import comfy_kitchen  # noqa: F401
    except ImportError:
        assert not hasattr(q, "ck")  # ComfyUI without comfy_kitchen has no `ck` either
    else:
        assert q.ck is comfy_kitchen


def test_comfy_extras_names():
    from comfy_extras.nodes_mask import composite

    dest, src = torch.zeros(1, 1, 4, 4), torch.ones(1, 1, 2, 2)
    out = composite(dest, src, 8, 8, multiplier=8)
    assert out is dest and out[0, 0].tolist() == [[0, 0, 0, 0], [0, 1, 1, 0], [0, 1, 1, 0], [0, 0, 0, 0]]
    from comfy.samplers import CFGGuider
    from comfy_extras.nodes_custom_sampler import Guider_Basic
    from comfy_extras.nodes_perpneg import Guider_PerpNeg

    class PackGuider(Guider_PerpNeg):  # Inspire subclasses it at import
        pass

    g = PackGuider(None)
    g.set_conds([["p", {}]], [["n", {}]], [["e", {}]])
    g.set_cfg(5.0, 0.5)
    assert g.conds["empty_negative_prompt"][0][1] == {"prompt_type": "negative"} and g.neg_scale == 0.5
    assert issubclass(Guider_Basic, CFGGuider)
    from comfy_extras.nodes_lt import LTXVAddGuide, get_noise_mask

    assert get_noise_mask({"samples": torch.zeros(2, 8, 3, 4, 4)}).shape == (2, 1, 3, 1, 1)
    assert LTXVAddGuide.GET_SCHEMA().node_id == "LTXVAddGuide"
    with pytest.raises(UnsupportedFeature, match="LTXVAddGuide"):
        LTXVAddGuide.execute()


def test_comfy_api_types_video_and_feature_flags(tmp_path):
    from comfy_api.latest import Input, InputImpl, Types, io, ui

    frames = torch.rand(4, 16, 16, 3)
    video = InputImpl.VideoFromComponents(Types.VideoComponents(images=frames, frame_rate=Fraction(8)))
    assert isinstance(video, Input.Video) and video.get_components().images.shape == (4, 16, 16, 3)
    path = tmp_path / "v.mp4"
    video.save_to(str(path), format=Types.VideoContainer.MP4, codec=Types.VideoCodec.H264)
    loaded = InputImpl.VideoFromFile(str(path))
    assert loaded.get_dimensions() == (16, 16) and loaded.get_frame_count() == 4
    assert Input.Image is torch.Tensor and io.Video.io_type == "VIDEO"
    assert ui.PreviewVideo([{"filename": "v.mp4", "subfolder": "", "type": "output"}]).as_dict()["animated"] == (True,)
    from comfy_api import feature_flags

    meta = {"sid1": {"feature_flags": {"supports_preview_metadata": True}}}
    assert feature_flags.supports_feature(meta, "sid1", "supports_preview_metadata")
    assert not feature_flags.supports_feature(meta, "other", "supports_preview_metadata")
    assert feature_flags.supports_feature(None, "x", "anything") is True
    # ComfyUI-Manager adds its flag to the module's dict at import; the server's features then carry it.
    feature_flags.SERVER_FEATURE_FLAGS.setdefault("extension", {}).setdefault("manager", {})["supports_csrf_post"] = (
        True
    )
    try:
        assert feature_flags.get_server_features()["extension"]["manager"]["supports_csrf_post"] is True
    finally:
        feature_flags.SERVER_FEATURE_FLAGS.pop("extension")
    from comfy_api.input_impl import VideoFromFile

    assert VideoFromFile is InputImpl.VideoFromFile


def test_other_names_packs_use():
    import server

    import nodes

    assert callable(nodes.interrupt_processing) and server.uuid.uuid4()
    from comfy.model_base import convert_tensor

    assert convert_tensor(torch.ones(1, dtype=torch.long), torch.float16, "cpu").dtype == torch.long
    assert convert_tensor(torch.ones(1), torch.float16, "cpu").dtype == torch.float16
    from comfy.sample import cleanup_additional_models

    cleanup_additional_models([])
    from comfy.ldm.modules.diffusionmodules.openaimodel import forward_timestep_embed

    assert forward_timestep_embed([torch.nn.Identity()], torch.ones(1), torch.zeros(1)) == torch.ones(1)


def test_zero_terminal_snr_rescale_where_packs_read_it():
    from comfy.model_sampling import rescale_zero_terminal_snr_sigmas
    from comfy_extras.nodes_model_advanced import rescale_zero_terminal_snr_sigmas as older_home

    out = older_home(torch.tensor([0.1, 1.0, 10.0], dtype=torch.float64))
    # The first sigma is kept, the last becomes ComfyUI's floor of alpha_bar (sigma ~ 4518.8).
    assert older_home is rescale_zero_terminal_snr_sigmas
    assert out[0].item() == pytest.approx(0.1) and out[-1].item() == pytest.approx(
        (1 / 4.8973451890853435e-08 - 1) ** 0.5
    )
