"""LTX-2.5's text encoder file (nodes/models/ltx25_text.py) read by CLIPLoader type ltxv: Gemma 4 under `model.`,
the dual projection and the file's own tokenizer. The reference for the projection is diffusers' LTX2TextConnectors
with per-modality projections (LTX-2.3/2.5: each layer's states RMS-normalised per token, flattened, scaled by
sqrt(width / hidden) and projected per modality), its connectors replaced by the identity so that what they are
given can be read; the reference network is transformers' Gemma 4 built from the tiny 12B-shaped config."""

from __future__ import annotations

import pytest
import torch
from diffusers.pipelines.ltx2.connectors import LTX2TextConnectors
from transformers import Gemma4TextConfig
from transformers.models.gemma4.modeling_gemma4 import Gemma4TextModel

from cluster.refs import ModelRef
from nodes.models import ltx25_demo, ltx25_text
from nodes.models.errors import ModelLoadError

VIDEO, AUDIO = 24, 8  # unequal, so that a swapped pair of projections shows


class _Identity(torch.nn.Module):
    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x, mask


def _ref(path: str = "/m/gemma4-12b-with-proj_tiny.safetensors") -> ModelRef:
    return ModelRef(component="text_encoder", arch="ltx2", sources=(path,), digests=("0",))


def reference_features(sd: dict[str, torch.Tensor], ids: torch.Tensor) -> torch.Tensor:
    """transformers' Gemma 4 hidden states through diffusers' per-modality projections: video then audio."""
    config = Gemma4TextConfig(**ltx25_demo.GEMMA4, rope_parameters=ltx25_demo.GEMMA4_ROPE, rms_norm_eps=1e-6)
    lm = Gemma4TextModel(config).eval()
    lm.load_state_dict({k[len("model.") :]: v for k, v in sd.items() if k.startswith("model.")})
    hidden, layers = config.hidden_size, config.num_hidden_layers + 1
    connectors = LTX2TextConnectors(
        caption_channels=hidden,
        text_proj_in_factor=layers,
        video_connector_num_attention_heads=1,
        video_connector_attention_head_dim=VIDEO,
        video_connector_num_layers=1,
        audio_connector_num_attention_heads=1,
        audio_connector_attention_head_dim=AUDIO,
        audio_connector_num_layers=1,
        per_modality_projections=True,
        video_hidden_dim=VIDEO,
        audio_hidden_dim=AUDIO,
        proj_bias=True,
    ).eval()
    for name, linear in (("video", connectors.video_text_proj_in), ("audio", connectors.audio_text_proj_in)):
        linear.weight.data = sd[f"text_embedding_projection.{name}_aggregate_embed.weight"].clone()
        linear.bias.data = sd[f"text_embedding_projection.{name}_aggregate_embed.bias"].clone()
    connectors.video_connector = connectors.audio_connector = _Identity()
    with torch.no_grad():
        states = torch.stack(lm(input_ids=ids, output_hidden_states=True).hidden_states, dim=-1)
        video, audio, _ = connectors(states, torch.ones(ids.shape, dtype=torch.long))
    return torch.cat([video, audio], dim=-1)


def test_encoding_is_gemma4_through_the_dual_projection() -> None:
    torch.set_num_threads(1)
    sd = ltx25_demo.tiny_text_encoder_state_dict(seed=7, video_width=VIDEO, audio_width=AUDIO)
    encoder = ltx25_text.load_text_encoder(_ref(), sd)
    tokens = encoder.tokenize("A red fox runs, \\(fast\\)")
    ids = [t for t, _ in tokens["gemma4"][0]]
    assert ids[0] == ltx25_text.BOS and len(ids) == 1 + len("A red fox runs, (fast)")  # one id per character
    got, pooled = encoder.encode(tokens)
    assert pooled is None and got.shape == (1, len(ids), VIDEO + AUDIO)
    want = reference_features(sd, torch.tensor([ids]))
    torch.testing.assert_close(got, want, rtol=0, atol=1e-5)


def test_the_demo_file_is_read_through_cliploader(tmp_path) -> None:
    """The written tiny file is detected as Gemma 4 and CLIPLoader(type ltxv) makes LTX-2.5's encoder of it."""
    from nodes.loaders import _single_clip_arch
    from nodes.models.detect import probe
    from nodes.models.loader import load_text_encoder

    torch.set_num_threads(1)
    path, _ = ltx25_demo.build_demo_ltx25_text(tmp_path)  # the encoder, then the prompt enhancer
    assert probe(path).arch == "gemma4"
    assert _single_clip_arch(path, "ltxv") == "ltx2"
    with pytest.raises(ValueError, match="Gemma 4 text encoder; it loads as LTX-2.5's with type ltxv"):
        _single_clip_arch(path, "stable_diffusion")
    ref = ModelRef("text_encoder", "ltx2", (str(path),), (None,), options=(("clip_type", "ltxv"),))
    encoder = load_text_encoder(ref)
    assert isinstance(encoder, ltx25_text.LTX25TextEncoder)
    cond, _ = encoder.encode(encoder.tokenize("a cat"))
    assert cond.shape == (1, 6, ltx25_demo.VIDEO_WIDTH + ltx25_demo.AUDIO_WIDTH) and torch.isfinite(cond).all()


def test_broken_files_are_refused_by_name() -> None:
    sd = ltx25_demo.tiny_text_encoder_state_dict(seed=7)
    no_tokenizer = {k: v for k, v in sd.items() if k != ltx25_text.TOKENIZER_KEY}
    with pytest.raises(ModelLoadError, match="no tokenizer \\(tokenizer_json\\)"):
        ltx25_text.load_text_encoder(_ref(), no_tokenizer)
    narrow = dict(sd)
    narrow["text_embedding_projection.audio_aggregate_embed.weight"] = torch.zeros(8, 64)
    with pytest.raises(ModelLoadError, match="audio_aggregate_embed.weight takes 64 features; this Gemma 4 gives 224"):
        ltx25_text.load_text_encoder(_ref(), narrow)
    no_bias = {k: v for k, v in sd.items() if k != "text_embedding_projection.video_aggregate_embed.bias"}
    with pytest.raises(ModelLoadError, match="no text_embedding_projection.video_aggregate_embed.weight and bias"):
        ltx25_text.load_text_encoder(_ref(), no_bias)
