"""LTX-2.5's audio-video transformer (nodes/models/ltx25_transformer.py, tiny file from
nodes/models/ltx25_transformer_demo.py): told apart from LTX-2.0 by its metadata as ComfyUI's model_detection reads
it, its text connectors and network equal to ComfyUI's own LTXAVModel run on the same file at development time
(scripts/record_comfyui_ltx25_transformer.py; one sigma, image-to-video's kept first frame, a batch of two, a guide
frame appended as LTXVAddGuide appends it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from nodes.loaders import make_ref
from nodes.models import loader
from nodes.models.detect import probe
from nodes.models.errors import ModelLoadError
from nodes.models.ltx25_transformer import LTX25DiffusionModel
from nodes.models.ltx25_transformer_demo import FILE, build
from scripts.comfyui_recording import sha256
from tests.recorded_tensors import tensor

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_ltx25_transformer.json").read_text())


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("ltx25_transformer"))


def load(path: Path) -> LTX25DiffusionModel:
    return loader.load_diffusion_model(make_ref("diffusion_model", "ltx2", [path]))


def test_the_file_is_an_ltx_audio_video_transformer_in_the_published_layout(tiny: Path) -> None:
    info = probe(tiny)
    assert (info.arch, info.kind, info.prefix) == ("ltx2", "diffusion_model", "model.diffusion_model.")
    assert tiny.as_posix().endswith(FILE)
    keys = load_file(str(tiny)).keys()
    for key in (
        "transformer_blocks.0.attn1.to_gate_logits.weight",
        "transformer_blocks.0.prompt_scale_shift_table",
        "prompt_adaln_single.linear.weight",
        "keyframes_abs_pos_embedding",
        "video_embeddings_connector.transformer_1d_blocks.0.attn1.to_gate_logits.weight",
        "audio_embeddings_connector.learnable_registers",
    ):
        assert "model.diffusion_model." + key in keys
    assert "model.diffusion_model.transformer_blocks.0.ff.net.0.proj.bias" not in keys  # LTX-2.5: no video FF bias
    assert isinstance(load(tiny), LTX25DiffusionModel)
    assert sha256(str(tiny)) == FIXTURE["file_sha256"]  # the numbers were recorded on this very file


@pytest.mark.parametrize("case", FIXTURE["cases"], ids=[c["name"] for c in FIXTURE["cases"]])
def test_equal_to_comfyuis_ltxav_model(tiny: Path, case: dict) -> None:
    torch.set_num_threads(1)
    model = load(tiny)
    given = {k: tensor(v) for k, v in case["inputs"].items()}
    with torch.no_grad():
        video_ctx, audio_ctx = model.module.connect(given["context"])
        video, audio = model.forward_av(
            given["video"],
            given["audio"],
            given["t_video"],
            given["t_audio"],
            given["context"],
            FIXTURE["frame_rate"],
            given.get("keyframe_idxs"),  # LTXVAddGuide's guide tokens, last in the video (the noise mask is in t_video)
            unprocessed=True,
        )
    connected = torch.cat([video_ctx, audio_ctx], dim=-1)
    assert connected.shape[1] == 1024  # the prompt's tokens and the registers, as ComfyUI pads them
    recorded = tensor(case["connected"])
    torch.testing.assert_close(connected[:, : recorded.shape[1]], recorded, rtol=0, atol=1e-5)
    torch.testing.assert_close(video, tensor(case["video_out"]), rtol=0, atol=1e-5)
    torch.testing.assert_close(audio, tensor(case["audio_out"]), rtol=0, atol=1e-5)


def test_processed_context_is_taken_as_it_is_and_a_wrong_width_is_refused(tiny: Path) -> None:
    model = load(tiny)
    case = FIXTURE["cases"][0]
    given = {k: tensor(v) for k, v in case["inputs"].items()}
    args = (given["video"], given["audio"], given["t_video"], given["t_audio"])
    with torch.no_grad():
        video_ctx, audio_ctx = model.module.connect(given["context"])
        processed = model.forward_av(*args, torch.cat([video_ctx, audio_ctx], -1), FIXTURE["frame_rate"])
        unprocessed = model.forward_av(*args, given["context"], FIXTURE["frame_rate"], unprocessed=True)
        torch.testing.assert_close(processed, unprocessed, rtol=0, atol=0)
        with pytest.raises(ValueError, match="LTX-2.5's transformer takes its text encoder's embeddings"):
            model.forward_av(*args, given["context"][..., :20], FIXTURE["frame_rate"])


def test_a_file_whose_config_contradicts_its_tensors_is_refused(tiny: Path, tmp_path: Path) -> None:
    sd = load_file(str(tiny))
    with safe_open(str(tiny), "pt") as f:
        meta = json.loads(f.metadata()["config"])
    meta["transformer"]["cross_attention_adaln"] = False
    meta["transformer"]["apply_gated_attention"] = True
    path = tmp_path / "contradicting.safetensors"
    save_file(sd, str(path), metadata={"config": json.dumps(meta)})
    with pytest.raises(ModelLoadError, match="prompt cross-attention modulation"):
        load(path)
    missing = {k: v for k, v in sd.items() if "to_gate_logits" not in k}
    path = tmp_path / "no_gates.safetensors"
    save_file(
        missing,
        str(path),
        metadata={"config": json.dumps({"transformer": {**meta["transformer"], "cross_attention_adaln": True}})},
    )
    with pytest.raises(ModelLoadError, match="missing tensor"):
        load(path)


def test_an_int8_convrot_file_loads_with_its_weights_dequantized(tiny: Path, tmp_path: Path) -> None:
    """The template's file is ComfyUI's int8 ConvRot one (`*.comfy_quant` layers): its blocks' linear weights are
    dequantized at load (comfy-kitchen's layout, as ComfyUI's ops hold them), so the network equals the float file
    whose weights are those dequantized ones, and stays near the unquantized file."""
    pytest.importorskip("comfy_kitchen")
    from nodes.models.comfy_quant import dequantize
    from nodes.models.marigold_demo import int8_convrot

    torch.set_num_threads(1)
    prefix = "model.diffusion_model."
    with safe_open(str(tiny), "pt") as f:
        metadata = f.metadata()
    bare = {k[len(prefix) :]: v.float() for k, v in load_file(str(tiny)).items()}
    quantized = int8_convrot(bare)
    assert any(k.endswith(".comfy_quant") for k in quantized)
    int8_path, float_path = tmp_path / "ltx-2.5-int8-convrot.safetensors", tmp_path / "dequantized.safetensors"
    save_file({prefix + k: v.contiguous() for k, v in quantized.items()}, str(int8_path), metadata=metadata)
    plain = dequantize(quantized, None, torch.float32)
    save_file({prefix + k: v.contiguous() for k, v in plain.items()}, str(float_path), metadata=metadata)
    case = FIXTURE["cases"][0]
    given = {k: tensor(v) for k, v in case["inputs"].items()}
    args = (given["video"], given["audio"], given["t_video"], given["t_audio"], given["context"], FIXTURE["frame_rate"])
    with torch.no_grad():
        from_int8 = load(int8_path).forward_av(*args, unprocessed=True)
        from_float = load(float_path).forward_av(*args, unprocessed=True)
    torch.testing.assert_close(from_int8, from_float, rtol=0, atol=0)
    assert (from_int8[0] - tensor(case["video_out"])).abs().max() < 0.2  # int8's rounding, not another network


LORA_FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_ltx25_lora.json").read_text())


@pytest.mark.parametrize("case", LORA_FIXTURE["cases"], ids=[str(c["strength"]) for c in LORA_FIXTURE["cases"]])
def test_a_lora_gives_comfyuis_merged_network(tiny: Path, tmp_path: Path, case: dict) -> None:
    """LoraLoaderModelOnly's patch on the LTX-2.5 transformer (ComfyUI's names under `diffusion_model.`, on gated
    attention, the prompt modulation, the bias-free feed-forward and a text connector) equals ComfyUI 0.3.64's merge
    run through ComfyUI's LTX-2.5 modules (scripts/record_comfyui_ltx25_lora.py) at strengths 0.5 and 1."""
    from cluster.refs import Patch, file_digest
    from nodes.models.ltx25_transformer_demo import LORA_LAYERS, tiny_lora_state_dict

    torch.set_num_threads(1)
    lora = tmp_path / "ltx-2.5-lora_tiny.safetensors"
    save_file(tiny_lora_state_dict(), str(lora))
    assert sha256(str(lora)) == LORA_FIXTURE["lora_sha256"] and case["patched_layers"] == len(LORA_LAYERS)
    ref = make_ref("diffusion_model", "ltx2", [tiny]).with_patch(Patch(str(lora), file_digest(lora), case["strength"]))
    given = {k: tensor(v) for k, v in LORA_FIXTURE["inputs"].items()}
    args = (given["video"], given["audio"], given["t_video"], given["t_audio"], given["context"])
    with torch.no_grad():
        video, audio = loader.load_diffusion_model(ref).forward_av(*args, LORA_FIXTURE["frame_rate"], unprocessed=True)
        plain, _ = load(tiny).forward_av(*args, LORA_FIXTURE["frame_rate"], unprocessed=True)
    torch.testing.assert_close(video, tensor(case["video_out"]), rtol=0, atol=1e-5)
    torch.testing.assert_close(audio, tensor(case["audio_out"]), rtol=0, atol=1e-5)
    assert (plain - video).abs().max() > 1e-3  # the LoRA changed the network
