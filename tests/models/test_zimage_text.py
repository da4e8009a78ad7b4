"""Z-Image's Qwen3 text encoder: ComfyUI's qwen_3_4b layout is detected and sized by shapes, and the encoding is
transformers' Qwen3 on the same weights: the chat-templated prompt's second-to-last hidden state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from cluster.refs import ModelRef
from nodes.models.detect import classify
from nodes.models.qwen3_text import qwen3_config
from nodes.models.zimage_demo import tiny_qwen3

FIXTURE = Path(__file__).parent / "fixtures" / "comfyui_qwen_tokenizer_ids.json"


def real_qwen3_4b_shapes() -> dict[str, tuple[int, ...]]:
    """qwen_3_4b.safetensors: 36 layers, 2560 wide, 32 query and 8 kv heads of 128, MLP 9728."""
    shapes = {"model.embed_tokens.weight": (151936, 2560), "model.norm.weight": (2560,)}
    for i in range(36):
        p = f"model.layers.{i}."
        shapes |= {
            p + "self_attn.q_proj.weight": (4096, 2560),
            p + "self_attn.k_proj.weight": (1024, 2560),
            p + "self_attn.v_proj.weight": (1024, 2560),
            p + "self_attn.o_proj.weight": (2560, 4096),
            p + "self_attn.q_norm.weight": (128,),
            p + "self_attn.k_norm.weight": (128,),
            p + "mlp.gate_proj.weight": (9728, 2560),
            p + "mlp.up_proj.weight": (9728, 2560),
            p + "mlp.down_proj.weight": (2560, 9728),
            p + "input_layernorm.weight": (2560,),
            p + "post_attention_layernorm.weight": (2560,),
        }
    return shapes


def test_real_qwen3_4b_is_detected_and_sized_from_its_shapes():
    from transformers import Qwen3Config, Qwen3Model

    shapes = real_qwen3_4b_shapes()
    info = classify(shapes, "qwen_3_4b.safetensors")
    assert (info.arch, info.kind) == ("qwen3", "text_encoder")
    cfg = qwen3_config({k: torch.empty(s, device="meta") for k, s in shapes.items()})
    assert {
        k: cfg[k]
        for k in (
            "vocab_size",
            "hidden_size",
            "intermediate_size",
            "num_hidden_layers",
            "num_attention_heads",
            "num_key_value_heads",
            "head_dim",
        )
    } == {
        "vocab_size": 151936,
        "hidden_size": 2560,
        "intermediate_size": 9728,
        "num_hidden_layers": 36,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
    }
    with torch.device("meta"):
        built = Qwen3Model(Qwen3Config(**cfg)).state_dict()
    assert {"model." + k: tuple(v.shape) for k, v in built.items()} == shapes


@pytest.fixture(scope="module")
def tiny_te(tmp_path_factory):
    """The demo's tiny Qwen3 (real vocabulary, 32 wide) as transformers built it, and its file."""
    model = tiny_qwen3(seed=5, layers=4)
    path = tmp_path_factory.mktemp("te") / "qwen_3_4b-tiny.safetensors"
    save_file({"model." + k: v.contiguous() for k, v in model.state_dict().items()}, str(path))
    return model, path


def load(path: Path, **options):
    from nodes.models.loader import load_text_encoder

    opts = tuple(sorted({"clip_type": "lumina2", **options}.items()))
    return load_text_encoder(ModelRef("text_encoder", "zimage", (str(path),), ("",), options=opts))


def test_prompt_is_chat_templated_with_comfyuis_tokenizer_ids(demo_workspace, tiny_te):
    """The Z-Image template around "A red fox" gives the ids ComfyUI 0.3.64's Qwen tokenizer gave for it."""
    template = "<|im_start|>user\nA red fox<|im_end|>\n<|im_start|>assistant\n"
    oracle = next(c["ids"] for c in json.loads(FIXTURE.read_text())["cases"] if c["text"] == template)
    te = load(tiny_te[1])
    assert [t for t, _ in te.tokenize("A red fox")["qwen3_4b"][0]] == oracle
    assert {w for _, w in te.tokenize("a (red:1.5) fox")["qwen3_4b"][0]} == {1.0}  # no weighting syntax


def test_encoding_is_transformers_second_to_last_hidden_state(demo_workspace, tiny_te):
    model, path = tiny_te
    te = load(path)
    tokens = te.tokenize("a photo of a cat, 8k")
    ids = torch.tensor([[t for t, _ in tokens["qwen3_4b"][0]]])
    cond, pooled = te.encode(tokens)
    with torch.no_grad():
        states = model(input_ids=ids, attention_mask=torch.ones_like(ids), output_hidden_states=True).hidden_states
    assert pooled is None and cond.shape == (1, ids.shape[1], 32)
    torch.testing.assert_close(cond, states[-2], rtol=1e-5, atol=1e-5)  # the output of layer L-2, not normed


def test_clip_set_last_layer_picks_the_unnormed_layer_output(demo_workspace, tiny_te):
    model, path = tiny_te
    te = load(path, layer=-1)
    tokens = te.tokenize("a cat")
    ids = torch.tensor([[t for t, _ in tokens["qwen3_4b"][0]]])
    cond, _ = te.encode(tokens)
    with torch.no_grad():
        out = model(input_ids=ids, output_hidden_states=True)
    assert not torch.allclose(cond, out.last_hidden_state)  # the final norm is not applied
    torch.testing.assert_close(model.norm(cond), out.last_hidden_state, rtol=1e-5, atol=1e-5)


def test_cliploader_takes_a_qwen3_file_as_comfyui_does(demo_workspace):
    """ComfyUI: a Qwen3-4B file is Z-Image's encoder for any CLIPLoader type but flux/flux2 (Klein's);
    lumina2 with another encoder is refused, naming the input, before any weight is read."""
    from nodes.loaders import CLIPLoader

    for clip_type, arch in (("lumina2", "zimage"), ("stable_diffusion", "zimage"), ("flux2", "flux2")):
        (ref,) = CLIPLoader().load_clip("qwen_3_4b-tiny.safetensors", clip_type)
        assert (ref.arch, ref.option("clip_type")) == (arch, clip_type)
    with pytest.raises(ValueError, match="clip_name: sd1-tiny-clip.safetensors is a clip text encoder"):
        CLIPLoader().load_clip("sd1-tiny-clip.safetensors", "lumina2")
    (ref,) = CLIPLoader().load_clip("sd1-tiny-clip.safetensors", "stable_diffusion")
    assert ref.arch == "sd1"
