"""FLUX.2 dev: its Mistral 3 text encoder file is detected (the Tekken tokenizer it carries), tokenizes the prompt
in FLUX.2's template with mistral-common's ids, and its stacked states equal ComfyUI 0.10.0's Mistral3Small24B on
the demo's tiny file (fixture from scripts/record_comfyui_flux2_mistral.py); the tiny dev transformer has dev's
guidance embedder and a context three Mistral states wide."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch

from cluster.refs import ModelRef, file_digest
from nodes.models.detect import probe
from nodes.models.flux2_dev_demo import SPECIALS, build_demo_flux2_dev
from nodes.models.flux2_mistral import LAYERS, Mistral3TextEncoder, tapped_states
from nodes.models.loader import load_diffusion_model, load_text_encoder
from tests.recorded_tensors import tensor

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_flux2_mistral.json").read_text())
# scripts/record_comfyui_flux2_dev_transformer.py: ComfyUI 0.10.0's Flux2 model on the tiny dev transformer
DEV = json.loads((Path(__file__).parent / "fixtures" / "comfyui_flux2_dev.json").read_text())
# ComfyUI's comfy/sd.py (detect_te_model): a 5120-wide llama with layer 39 is MISTRAL3_24B (layer 39 missing: the
# 30-layer pruned file), and load_text_encoder_state_dicts hands clip_data[0]["tekken_model"] to Flux2Tokenizer;
# comfy/text_encoders/flux.py: Mistral3_24BModel taps layers [10, 20, 30], Flux2TEModel joins them per token.
COMFYUI_TAPS = (10, 20, 30)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    torch.set_num_threads(1)
    paths = build_demo_flux2_dev(tmp_path_factory.mktemp("models"))
    return {p.parent.name: str(p) for p in paths}


@pytest.fixture(scope="module")
def encoder(files) -> Mistral3TextEncoder:
    path = files["text_encoders"]
    assert hashlib.sha256(Path(path).read_bytes()).hexdigest() == FIXTURE["weights_sha256"]
    ref = ModelRef("text_encoder", "flux2", (path,), (file_digest(path),), (("clip_type", "flux2"),))
    return load_text_encoder(ref)


def test_the_mistral_file_is_detected_and_loads_as_flux2_devs_encoder(files, encoder):
    info = probe(files["text_encoders"])
    assert (info.arch, info.kind) == ("mistral3", "text_encoder")
    assert isinstance(encoder, Mistral3TextEncoder) and LAYERS == COMFYUI_TAPS


def test_the_prompt_is_tokenized_in_flux2s_template_with_mistral_commons_ids(encoder):
    ids = [i for i, _ in encoder.tokenize("the cat")["mistral3_24b"][0]]
    special = {s: i for i, s in enumerate(SPECIALS)}
    assert ids[:2] == [1, special["[SYSTEM_PROMPT]"]] and ids[-1] == special["[/INST]"]
    assert special["[/SYSTEM_PROMPT]"] in ids and special["[INST]"] in ids
    # tekken numbers its byte tokens after the special tokens: rank r is id r + len(SPECIALS)
    prompt = ids[ids.index(special["[INST]"]) + 1 : -1]
    assert encoder.tokenizer.decode(prompt) == "the cat" and all(i >= len(SPECIALS) for i in prompt)
    if "ids" in FIXTURE["tokenizer"]:  # a ComfyUI whose tokenizer runs beside this transformers
        for prompt, want in zip(FIXTURE["prompts"], FIXTURE["tokenizer"]["ids"]):
            assert [i for i, _ in encoder.tokenize(prompt)["mistral3_24b"][0]] == want
    else:  # 0.10.0 calls MistralConverter with transformers 4's vocab= keyword, which transformers 5 removed
        assert "vocab_file" in FIXTURE["tokenizer"]["error"]


@pytest.mark.parametrize("run", FIXTURE["runs"], ids=lambda r: f"{len(r['ids'])}-tokens")
def test_stacked_states_equal_comfyuis_mistral(encoder, run):
    with torch.no_grad():
        cond = tapped_states(encoder.modules["mistral3_24b"], torch.tensor([run["ids"]]))
    assert torch.allclose(cond, tensor(run["cond"]), atol=1e-5, rtol=1e-5)


@pytest.fixture(scope="module")
def dev_model(files):
    path = files["diffusion_models"]
    assert hashlib.sha256(Path(path).read_bytes()).hexdigest() == DEV["weights_sha256"]
    return load_diffusion_model(ModelRef("diffusion_model", "flux2", (path,), (file_digest(path),)))


def test_the_dev_transformer_has_a_guidance_embedder_and_a_mistral_wide_context(dev_model):
    assert DEV["guidance_embed"]  # ComfyUI's detection saw it too
    assert dev_model.config["guidance_embeds"] and dev_model.config["joint_attention_dim"] == len(LAYERS) * 16


@pytest.mark.parametrize("case", DEV["cases"], ids=lambda c: c["name"])
def test_a_dev_evaluation_equals_comfyuis_flux2(dev_model, case):
    x, sigma = tensor(case["x"]), case["sigma"]
    cond = {"context": tensor(case["context"]), "guidance": case["guidance"]}
    with torch.no_grad():
        out = dev_model.apply(x, torch.full((x.shape[0],), sigma), cond)
    assert torch.allclose(x - sigma * out, tensor(case["denoised"]), atol=1e-5, rtol=1e-5)


def test_cliploader_type_flux2_takes_the_mistral_file(files):
    from nodes.loaders import _single_clip_arch

    assert _single_clip_arch(Path(files["text_encoders"]), "flux2") == "flux2"
