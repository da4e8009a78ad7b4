"""Audio encoders of models/audio_encoders (ComfyUI's AudioEncoderLoader): wav2vec 2.0 files, whose key layout is
transformers' Wav2Vec2Model's (`feature_extractor.conv_layers.N`, `feature_projection`, `encoder.layers.N`,
`encoder.pos_conv_embed.conv.parametrizations.weight.original0/1`; a `wav2vec2.` prefix is dropped), so they run
on that class.

ComfyUI knows two configurations by the width: 1024 (wav2vec2-large: 24 layers, a layer norm in every feature
convolution, biases, the waveform normalised, the "stable" pre-norm encoder) and 768 (wav2vec2-base: 12 layers,
one group norm in the first convolution, no biases, no normalisation, the post-norm encoder). Here the sizes are read
from the tensors (width, layers, feed-forward width, convolution width) and the two layouts are told by their
keys (a layer norm in the second convolution means the large layout and everything that goes with it); the heads
are 64 wide, as in both released sizes. Whisper files (HuMo's encoder) load as nodes.models.whisper_encoder.

`encode` is ComfyUI's wav2vec2 forward: channels averaged, the whole batch normalised with one mean and one
(unbiased) variance where the layout asks for it, then every layer's hidden states (the embedding's and each
layer's, the last after the final norm) and the last one. 16 kHz input (the node resamples first)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from transformers import Wav2Vec2Config, Wav2Vec2Model

from nodes.models.errors import ModelLoadError
from nodes.models.flux_keys import count_blocks
from nodes.models.safetensors_io import build_module

SAMPLE_RATE = 16000  # what wav2vec 2.0 was trained on
HEAD_WIDTH = 64  # both released sizes: 1024 / 16 heads, 768 / 12 heads
MARKER = "encoder.layer_norm.bias"
WHISPER_MARKER = "model.encoder.embed_positions.weight"
PREFIX = "wav2vec2."
# The feature extractor's seven convolutions (kernel, stride), fixed by wav2vec 2.0
CONV_KERNELS = (10, 3, 3, 3, 3, 2, 2)
CONV_STRIDES = (5, 2, 2, 2, 2, 2, 2)
POS_CONV_KERNEL, POS_CONV_GROUPS = 128, 16
NORMALIZE_EPS = 1e-7


def is_audio_encoder(keys: Mapping[str, object]) -> bool:
    """True for a file the loader takes: a wav2vec 2.0 encoder (bare or under `wav2vec2.`) or a Whisper one."""
    return MARKER in keys or PREFIX + MARKER in keys or WHISPER_MARKER in keys


def wav2vec2_config(sd: Mapping[str, torch.Tensor]) -> tuple[Wav2Vec2Config, bool]:
    """transformers' config for an unprefixed wav2vec 2.0 state dict, and whether the waveform is normalised."""
    width = int(sd[MARKER].shape[0])
    large = "feature_extractor.conv_layers.1.layer_norm.weight" in sd
    conv = int(sd["feature_extractor.conv_layers.0.conv.weight"].shape[0])
    config = Wav2Vec2Config(
        hidden_size=width,
        num_hidden_layers=count_blocks(sd, "encoder.layers"),
        num_attention_heads=max(1, width // HEAD_WIDTH),
        intermediate_size=int(sd["encoder.layers.0.feed_forward.intermediate_dense.weight"].shape[0]),
        conv_dim=(conv,) * len(CONV_KERNELS),
        conv_kernel=CONV_KERNELS,
        conv_stride=CONV_STRIDES,
        conv_bias="feature_extractor.conv_layers.1.conv.bias" in sd,
        feat_extract_norm="layer" if large else "group",
        do_stable_layer_norm=large,
        num_conv_pos_embeddings=POS_CONV_KERNEL,
        num_conv_pos_embedding_groups=POS_CONV_GROUPS,
        hidden_act="gelu",
        feat_extract_activation="gelu",
        layer_norm_eps=1e-5,
        apply_spec_augment=False,
    )
    return config, large


def native_conv1d(conv: torch.nn.Conv1d, x: torch.Tensor, weight: torch.Tensor | None = None) -> torch.Tensor:
    """conv(x) through torch's native im2col + GEMM, one group at a time, on a CPU float32 input: torch's own CPU
    kernel for a grouped or long 1-D convolution (oneDNN) rounds by the number of threads, and an executor and
    the in-process engine may run with different counts; the GEMM gives the same bits on any count. `weight`:
    the weight to use (a weight-normed convolution computes its own). Elsewhere plain conv."""
    weight = conv.weight if weight is None else weight
    if x.device.type != "cpu" or x.dtype != torch.float32 or conv.dilation != (1,) or conv.padding_mode != "zeros":
        return conv._conv_forward(x, weight, conv.bias)
    groups, (k,), (stride,), (pad,) = conv.groups, conv.kernel_size, conv.stride, conv.padding
    biases = [None] * groups if conv.bias is None else conv.bias.chunk(groups)
    out = [
        torch.ops.aten.thnn_conv2d(xi.unsqueeze(2), wi.unsqueeze(2), (1, k), bi, (1, stride), (0, pad)).squeeze(2)
        for xi, wi, bi in zip(x.chunk(groups, dim=1), weight.chunk(groups), biases, strict=True)
    ]
    return torch.cat(out, dim=1)


def _weight_norm(g: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """The positional convolution's weight, v scaled to norm g per kernel position (wav2vec 2.0's weight norm over
    dim 2), computed once in float64: torch's float32 norm rounds by the thread count."""
    with torch.no_grad():
        v64 = v.detach().double()
        norm = v64.pow(2).sum(dim=(0, 1), keepdim=True).sqrt()
        return (v64 * (g.detach().double() / norm)).float()


def _pos_conv_names(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Older exports name the positional convolution's weight norm weight_g / weight_v."""
    base = "encoder.pos_conv_embed.conv."
    for old, new in (
        ("weight_g", "parametrizations.weight.original0"),
        ("weight_v", "parametrizations.weight.original1"),
    ):
        if base + old in sd:
            sd[base + new] = sd.pop(base + old)
    return sd


@dataclass
class AudioEncoder:
    """A loaded wav2vec 2.0 encoder."""

    module: Wav2Vec2Model
    normalize: bool
    sample_rate: int = SAMPLE_RATE

    def encode(self, waveform: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """waveform [B, channels, samples] at 16 kHz -> (last hidden state [B, frames, width], every layer's hidden
        states stacked [layers + 1, B, frames, width])."""
        device = next(self.module.parameters()).device
        x = waveform.to(device, torch.float32).mean(dim=1)
        if self.normalize:  # one mean and variance over the whole batch, as ComfyUI computes them
            x = (x - x.mean()) / torch.sqrt(x.var() + NORMALIZE_EPS)
        with torch.no_grad():
            out = self.module(input_values=x, output_hidden_states=True)
        # transformers keeps the last layer's output before the stable layout's final norm; ComfyUI lists the
        # encoder's output (after it) last, as in the base layout, where both are the same
        return out.last_hidden_state, torch.stack([*out.hidden_states[:-1], out.last_hidden_state])


def load_audio_encoder(state_dict: Mapping[str, torch.Tensor], path: str | None):
    """An AudioEncoder from a wav2vec 2.0 file, or a WhisperAudioEncoder from a Whisper one; float32 compute."""
    if WHISPER_MARKER in state_dict:
        from nodes.models.whisper_encoder import load_whisper_encoder

        return load_whisper_encoder(state_dict, path)
    sd = {k[len(PREFIX) :] if k.startswith(PREFIX) else k: v for k, v in state_dict.items()}
    if MARKER not in sd:
        raise ModelLoadError(path, "not an audio encoder Comfy Cluster can run (supported: wav2vec 2.0, Whisper)")
    sd = _pos_conv_names(sd)
    try:
        config, large = wav2vec2_config(sd)
    except KeyError as e:
        raise ModelLoadError(path, f"not a usable wav2vec 2.0 encoder: missing {e}") from None
    sd.setdefault("masked_spec_embed", torch.zeros(config.hidden_size))  # training only; some exports drop it
    module = build_module(lambda: Wav2Vec2Model(config), sd, path, "wav2vec 2.0 audio encoder")
    module.eval()
    pos_conv = module.encoder.pos_conv_embed.conv  # grouped, kernel 128, weight-normed
    weight = _weight_norm(pos_conv.parametrizations.weight.original0, pos_conv.parametrizations.weight.original1)
    pos_conv.forward = lambda x: native_conv1d(pos_conv, x, weight)
    return AudioEncoder(module=module, normalize=large)
