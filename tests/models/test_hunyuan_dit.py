"""HunyuanDiT (nodes/models/hunyuan_dit*.py) against ComfyUI 0.3.64 on demo-models' tiny all-in-one checkpoint and
tiny BERT vocabulary (scripts/record_comfyui_hunyuan_dit.py): the detected family, its v-prediction schedule, the
DiT's denoised output at two sigmas, and CLIPTextEncodeHunyuanDiT's / CLIPTextEncode's conditioning (token ids,
BERT's states and mask, mT5-XL's states and mask) for English, Chinese, weighted and empty prompts; a checkpoint
without the user's BERT vocabulary is refused naming where to put it. The workflow's picture is
tests/e2e/test_hunyuan_dit_workflow.py's."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
import torch

from tests.recorded_tensors import load_json, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_hunyuan_dit.json.xz")
CHECKPOINT = "hunyuan_dit_1.2_tiny.safetensors"


def refs(ws):
    from nodes.loaders import CheckpointLoaderSimple

    return CheckpointLoaderSimple().load_checkpoint(CHECKPOINT)[:3]


def dit_inputs(seed: int = 3) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    bert_mask = torch.zeros(2, 77)
    bert_mask[0, :9], bert_mask[1, :30] = 1, 1
    t5_mask = torch.zeros(2, 256)
    t5_mask[0, :5], t5_mask[1, :12] = 1, 1
    return {
        "x": torch.randn(2, 4, 8, 10, generator=g),
        "context": torch.randn(2, 77, 32, generator=g),
        "attention_mask": bert_mask,
        "conditioning_mt5xl": torch.randn(2, 256, 32, generator=g),
        "attention_mask_mt5xl": t5_mask,
    }


def test_recorded_on_these_files(demo_workspace):
    models = demo_workspace.models_dir
    digest = lambda p: hashlib.sha256(p.read_bytes()).hexdigest()  # noqa: E731
    assert digest(models / "checkpoints" / CHECKPOINT) == FIXTURE["file_sha256"]
    assert digest(models / "configs" / "hydit_clip_tokenizer" / "vocab.txt") == FIXTURE["vocab_sha256"]


def test_detected_and_denoised_as_comfyuis(demo_workspace):
    from nodes.models.detect import classify, probe
    from nodes.models.loader import load_diffusion_model
    from nodes.sampling.model_sampling import model_sampling_from_config

    torch.set_num_threads(1)
    info = probe(demo_workspace.models_dir / "checkpoints" / CHECKPOINT)
    assert (info.arch, info.kind) == ("hunyuan_dit", "checkpoint")
    assert info.components == {"diffusion_model", "vae", "text_encoder"}
    assert (FIXTURE["model_class"], FIXTURE["model_type"]) == ("HunyuanDiT", "V_PREDICTION")
    v10 = {"mlp_t5.0.weight": (8192, 2048), "extra_embedder.0.weight": (5632, 3968)}
    assert classify(v10, "hunyuan_dit_1.0.safetensors").arch == "hunyuan_dit1"  # ComfyUI's HunyuanDiT1 rule
    model_ref, _, _ = refs(demo_workspace)
    model = load_diffusion_model(model_ref)
    ms = model_sampling_from_config(model.sampling)
    assert model.sampling["prediction"] == "v"
    assert (float(ms.sigma_min), float(ms.sigma_max)) == pytest.approx((FIXTURE["sigma_min"], FIXTURE["sigma_max"]))
    data = dit_inputs()
    for name, value in data.items():
        assert float(value.sum()) == pytest.approx(FIXTURE["input_sums"][name], abs=1e-4), name
    cond = {k: v for k, v in data.items() if k != "x"}
    with torch.no_grad():
        for key, entry in FIXTURE["denoised"].items():
            sigma = torch.full((2,), float(key))
            out = model.apply(ms.calculate_input(sigma, data["x"]), ms.timestep(sigma), cond)
            torch.testing.assert_close(ms.calculate_denoised(sigma, out, data["x"]), tensor(entry), atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", sorted(FIXTURE["prompts"]))
def test_conditioning_equals_comfyuis(demo_workspace, name: str):
    from nodes.models.hunyuan_dit_text import BERT, MT5
    from nodes.models.loader import load_text_encoder

    torch.set_num_threads(1)
    want = FIXTURE["prompts"][name]
    te = load_text_encoder(refs(demo_workspace)[1])
    bert, mt5 = te.tokenize(want["bert"]), te.tokenize(want["mt5xl"])
    assert [t for t, _ in bert[BERT][0]] == want["bert_ids"]
    assert [t for t, _ in mt5[MT5][0]] == want["mt5xl_ids"]
    for case, tokens in (("hunyuan_dit", {BERT: bert[BERT], MT5: mt5[MT5]}), ("clip_text_encode", bert)):
        cond, pooled = te.encode(tokens)
        extras = te.extras(tokens)
        rec = want[case]
        assert pooled is None and rec["pooled_output"] is None
        torch.testing.assert_close(cond, tensor(rec["cond"]), atol=1e-5, rtol=0)
        torch.testing.assert_close(extras["conditioning_mt5xl"], tensor(rec["conditioning_mt5xl"]), atol=1e-5, rtol=0)
        for key in ("attention_mask", "attention_mask_mt5xl"):
            assert torch.equal(extras[key], tensor(rec[key]).float()), (case, key)


def test_a_checkpoint_without_the_bert_vocabulary_is_refused_by_name(demo_workspace, tmp_path):
    from nodes.model_checks import clear_cache
    from nodes.models.errors import ModelLoadError
    from nodes.models.hunyuan_dit_text import vocab_problem
    from nodes.models.loader import load_text_encoder
    from nodes.workspace import Workspace, activate

    ws = Workspace(tmp_path / "ws").create()
    shutil.copy(demo_workspace.models_dir / "checkpoints" / CHECKPOINT, ws.models_dir / "checkpoints" / CHECKPOINT)
    try:
        activate(ws)
        clear_cache()
        problem = vocab_problem(str(ws.models_dir / "checkpoints" / CHECKPOINT))
        assert "Tencent Hunyuan Community License" in problem and "hydit_clip_tokenizer/vocab.txt" in problem
        from nodes.loaders import make_ref

        ref = make_ref("text_encoder", "hunyuan_dit", [ws.models_dir / "checkpoints" / CHECKPOINT])
        with pytest.raises(ModelLoadError, match="BERT tokenizer vocabulary is not shipped"):
            load_text_encoder(ref)
    finally:
        activate(demo_workspace)
