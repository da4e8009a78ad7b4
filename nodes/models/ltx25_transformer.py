"""LTX-2.5's audio-video transformer (diffusion_models/ltx-2.5-22b-*-transformer*.safetensors, Lightricks/LTX-2.5):
LTX-2's key layout (the original Lightricks names, bare or under `model.diffusion_model.`) with what LTX-2.3 added
and LTX-2.5 keeps: per-head gated attention (`*.to_gate_logits`), the prompt cross-attention modulation (9
modulation rows per block, `prompt_scale_shift_table` / `audio_prompt_scale_shift_table`, the global
`prompt_adaln_single` / `audio_prompt_adaln_single`), feed-forwards without biases (2.5), the learned first-frame
marker `keyframes_abs_pos_embedding` (2.5), and the text connectors inside the file
(`{video,audio}_embeddings_connector.*`: 1-D transformers with 128 learnable registers) that turn the LTX-2.5 text
encoder's unprocessed embeddings (nodes/models/ltx25_text.py) into the network's context.

Detection is ComfyUI's (comfy/model_detection.py, Comfy-Org/ComfyUI a9fc7512): `adaln_single.emb.timestep_embedder.
linear_1.bias` beside `audio_adaln_single.linear.weight` is "ltxav"; blocks counted, the text width read from
`attn2.to_k`, `use_keyframes_abs_pos_embedding` from the key's presence and everything else from the metadata
`config` JSON's "transformer" section (LTXAVModel's argument names, its defaults where absent). A file whose section
asks for gated attention, the prompt modulation or captions projected before the connectors is built here; LTX-2.0
files stay with nodes/models/ltx2.py.

The rules followed are those of ComfyUI's comfy/ldm/lightricks/av_model.py (Comfy-Org/ComfyUI 0a29ddae) and
model.py (e3fe2188) as read: timesteps embedded per token, the prompt modulation from the largest timestep of each
modality, the audio-to-video gate from the audio's largest timestep (and the video-to-audio gate from the video's),
the video-to-audio attention reading the video after the audio-to-video update, the first-frame marker added to the
tokens whose frame starts at 0 (guide tokens excepted), and the connectors run on the prompt tokens followed by the
learnable registers up to 1024 tokens. The layers are diffusers' (LTX2VideoTransformer3DModel's attention, rotary
tables and timestep embedders; LTX2ConnectorTransformer1d's blocks), driven in that order by this module's own
forward."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from diffusers import LTX2VideoTransformer3DModel
from diffusers.loaders.single_file_utils import convert_ltx2_transformer_to_diffusers
from diffusers.models.transformers.transformer_ltx2 import LTX2VideoTransformerBlock
from diffusers.pipelines.ltx2.connectors import LTX2ConnectorTransformer1d
from torch import nn

from cluster.refs import ModelRef
from nodes.arch import latent_format, sampling_config
from nodes.models import comfy_quant
from nodes.models.errors import ModelLoadError
from nodes.models.lora import LoraTargets, merge_loras
from nodes.models.ltx2 import LTX2DiffusionModel, diffusers_config, video_coords
from nodes.models.safetensors_io import build_module

AUDIO_CHANNELS, AUDIO_BINS = 8, 16
CONNECTORS = ("video_embeddings_connector.", "audio_embeddings_connector.")
# LTXAVModel's defaults for the settings only this architecture reads (ComfyUI's names).
DEFAULTS: dict[str, Any] = {
    "apply_gated_attention": False,
    "cross_attention_adaln": False,
    "caption_proj_before_connector": False,
    "caption_projection_first_linear": True,
    "ff_bias": True,
    "audio_ff_bias": True,
    "use_prompt_adaln_single": True,
    "connector_attention_head_dim": 128,
    "connector_num_attention_heads": 30,
    "connector_num_layers": 2,
    "connector_apply_gated_attention": False,
}
CONNECTOR_REGISTERS = 128  # Embeddings1DConnector's default; the published files have 128 learnable registers
CONNECTOR_MIN_TOKENS = 1024  # ComfyUI fills the prompt up to this many tokens with the registers
CONNECTOR_MAX_POS = 4096
# The original names of the additions -> diffusers' (the rest is diffusers' own LTX-2 conversion).
RENAMES = (("prompt_adaln_single.", "prompt_adaln."),)


def is_ltx25(config: Mapping[str, Any]) -> bool:
    """Whether a transformer config (ComfyUI's dit_config) asks for this architecture (LTX-2.3 / 2.5)."""
    return bool(
        config.get("cross_attention_adaln")
        or config.get("apply_gated_attention")
        or config.get("caption_proj_before_connector")
        or config.get("ff_bias", True) is False
    )


def full_config(config: Mapping[str, Any], sd: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    out = {**DEFAULTS, **config}
    out["use_keyframes_abs_pos_embedding"] = "keyframes_abs_pos_embedding" in sd
    out["connector_num_layers"] = config.get(
        "connector_num_layers",
        len({k.split(".")[2] for k in sd if k.startswith("video_embeddings_connector.transformer_1d_blocks.")}),
    )
    if out["cross_attention_adaln"] != ("transformer_blocks.0.prompt_scale_shift_table" in sd):
        raise ValueError("its config and tensors disagree on the prompt cross-attention modulation")
    if out["caption_proj_before_connector"] and out["caption_projection_first_linear"]:
        raise ValueError(
            "a caption projection before the connectors (caption_projection_first_linear) is not supported"
        )
    if not out["caption_proj_before_connector"]:
        raise ValueError("LTX-2.3/2.5 transformers without caption_proj_before_connector are not supported")
    return out


def diffusers_kwargs(config: Mapping[str, Any]) -> dict[str, Any]:
    """LTX2VideoTransformer3DModel's arguments (the network without the connectors): LTX-2.0's (ltx2.diffusers_config,
    whose refusals hold here too) and the 2.3/2.5 additions."""
    return {
        **diffusers_config(config),
        "gated_attn": bool(config["apply_gated_attention"]),
        "audio_gated_attn": bool(config["apply_gated_attention"]),
        "cross_attn_mod": bool(config["cross_attention_adaln"]),
        "audio_cross_attn_mod": bool(config["cross_attention_adaln"]),
        "use_prompt_embeddings": False,
        "ff_bias": bool(config["ff_bias"]),
        "audio_ff_bias": bool(config["audio_ff_bias"]),
        "use_prompt_adaln_single": bool(config["use_prompt_adaln_single"]),
        "use_keyframes_abs_pos_embedding": bool(config["use_keyframes_abs_pos_embedding"]),
    }


def connector(config: Mapping[str, Any], audio: bool) -> LTX2ConnectorTransformer1d:
    heads = config["connector_num_attention_heads"]
    head_dim = config["connector_attention_head_dim"]
    if audio:
        heads = config.get("audio_connector_num_attention_heads", heads)
        head_dim = config.get("audio_connector_attention_head_dim", head_dim)
    return LTX2ConnectorTransformer1d(
        num_attention_heads=heads,
        attention_head_dim=head_dim,
        num_layers=config["connector_num_layers"],
        num_learnable_registers=CONNECTOR_REGISTERS,
        rope_base_seq_len=CONNECTOR_MAX_POS,
        rope_theta=10000.0,
        rope_double_precision=True,
        # ComfyUI's connectors rotate halves unless the transformer's rope_type says otherwise (default "split")
        rope_type="split" if config.get("rope_type", "split") == "split" else "interleaved",
        gated_attention=bool(config["connector_apply_gated_attention"]),
    )


def convert_state_dict(sd: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The file's tensors (prefix stripped) in this module's names: `network.*` (diffusers' transformer),
    `video_connector.*` and `audio_connector.*`."""
    out: dict[str, torch.Tensor] = {}
    rest = {}
    for key, value in sd.items():
        for side in CONNECTORS:
            if key.startswith(side):
                name = key[len(side) :].replace("transformer_1d_blocks.", "transformer_blocks.")
                name = name.replace(".q_norm.", ".norm_q.").replace(".k_norm.", ".norm_k.")
                out[("video_connector." if side.startswith("video") else "audio_connector.") + name] = value
                break
        else:
            name = key
            for theirs, ours in RENAMES:
                if name.startswith(theirs) or name.startswith("audio_" + theirs):
                    name = name.replace(theirs, ours, 1)
            rest[name] = value
    for key, value in convert_ltx2_transformer_to_diffusers(rest).items():
        out["network." + key] = value
    return out


class LTX25Block(LTX2VideoTransformerBlock):
    """One audio-video block run in ComfyUI's order (the class of diffusers' blocks is swapped to this one, so the
    tensors keep their names and the executor's per-block hooks still fire)."""

    def forward(  # type: ignore[override]
        self,
        vx: torch.Tensor,
        ax: torch.Tensor,
        ctx: tuple[torch.Tensor, torch.Tensor],
        temb: dict[str, torch.Tensor | None],
        pe: dict[str, Any],
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return block_forward(self, vx, ax, ctx, temb, pe)


def block_forward(
    block: LTX2VideoTransformerBlock,
    vx: torch.Tensor,
    ax: torch.Tensor,
    ctx: tuple[torch.Tensor, torch.Tensor],
    temb: dict[str, torch.Tensor | None],
    pe: dict[str, Any],
) -> tuple[torch.Tensor, torch.Tensor]:
    """One diffusers audio-video block (LTX-2.0's too) in the order of ComfyUI's BasicAVTransformerBlock."""
    b = vx.shape[0]
    v_ada = block.get_mod_params(block.scale_shift_table, temb["video"], b)
    a_ada = block.get_mod_params(block.audio_scale_shift_table, temb["audio"], b)
    vx = vx + block.attn1(_adaln(vx, v_ada[1], v_ada[0]), query_rotary_emb=pe["video"]) * v_ada[2]
    vx = vx + _text_attention(block, vx, ctx[0], block.attn2, v_ada, "prompt_scale_shift_table", temb["prompt"])
    run_audio = ax.shape[1] > 0
    if run_audio:
        ax = ax + block.audio_attn1(_adaln(ax, a_ada[1], a_ada[0]), query_rotary_emb=pe["audio"]) * a_ada[2]
        ax = ax + _text_attention(
            block, ax, ctx[1], block.audio_attn2, a_ada, "audio_prompt_scale_shift_table", temb["audio_prompt"]
        )
        v_ca = block.get_mod_params(block.video_a2v_cross_attn_scale_shift_table[:4], temb["video_ca"], b)
        a_ca = block.get_mod_params(block.audio_a2v_cross_attn_scale_shift_table[:4], temb["audio_ca"], b)
        ax_norm = _rms(ax)
        a2v = block.audio_to_video_attn(
            _adaln(vx, v_ca[0], v_ca[1]),
            encoder_hidden_states=ax_norm * (1 + a_ca[0]) + a_ca[1],
            query_rotary_emb=pe["video_cross"],
            key_rotary_emb=pe["audio_cross"],
        )
        v_gate = block.get_mod_params(block.video_a2v_cross_attn_scale_shift_table[4:], temb["a2v_gate"], b)[0]
        vx = vx + a2v * v_gate
        # ComfyUI normalises the video again after the audio-to-video update
        v2a = block.video_to_audio_attn(
            ax_norm * (1 + a_ca[2]) + a_ca[3],
            encoder_hidden_states=_adaln(vx, v_ca[2], v_ca[3]),
            query_rotary_emb=pe["audio_cross"],
            key_rotary_emb=pe["video_cross"],
        )
        a_gate = block.get_mod_params(block.audio_a2v_cross_attn_scale_shift_table[4:], temb["v2a_gate"], b)[0]
        ax = ax + v2a * a_gate
    vx = vx + block.ff(_adaln(vx, v_ada[4], v_ada[3])) * v_ada[5]
    if run_audio:
        ax = ax + block.audio_ff(_adaln(ax, a_ada[4], a_ada[3])) * a_ada[5]
    return vx, ax


def _text_attention(
    block: LTX2VideoTransformerBlock,
    x: torch.Tensor,
    context: torch.Tensor,
    attn: nn.Module,
    ada: tuple[torch.Tensor, ...],
    table: str,
    prompt_temb: torch.Tensor | None,
) -> torch.Tensor:
    if not block.cross_attn_adaln:
        return attn(_rms(x), encoder_hidden_states=context)
    kv_table = getattr(block, table)[None, None].to(x)
    if prompt_temb is None:  # a file without the prompt timestep embedder: the table alone
        shift_kv, scale_kv = kv_table.unbind(dim=2)
    else:
        shift_kv, scale_kv = (kv_table + prompt_temb.reshape(x.shape[0], prompt_temb.shape[1], 2, -1)).unbind(2)
    out = attn(_adaln(x, ada[7], ada[6]), encoder_hidden_states=context * (1 + scale_kv) + shift_kv)
    return out * ada[8]


def _rms(x: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


def _adaln(x: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    return _rms(x) * (1 + scale) + shift


def _per_token(t: torch.Tensor, batch: int, tokens: int) -> torch.Tensor:
    """A timestep given per batch element or per token as [B, tokens]."""
    t = t.reshape(batch, -1)
    return t.expand(batch, tokens) if t.shape[1] == 1 else t


class LTX25Network(nn.Module):
    """diffusers' transformer layers plus the two text connectors, run as ComfyUI's LTXAVModel runs them."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        super().__init__()
        self.network = LTX2VideoTransformer3DModel(**diffusers_kwargs(config))
        for block in self.network.transformer_blocks:
            block.__class__ = LTX25Block
        for module in self.network.modules():  # ComfyUI's q/k norms: eps 1e-5
            if hasattr(module, "norm_q") and hasattr(module, "norm_k"):
                module.norm_q.eps = module.norm_k.eps = 1e-5
        self.video_connector = connector(config, audio=False)
        self.audio_connector = connector(config, audio=True)
        for side in (self.video_connector, self.audio_connector):
            for block in side.transformer_blocks:
                block.attn1.norm_q.eps = block.attn1.norm_k.eps = 1e-5
        self.video_width = config["cross_attention_dim"]

    def connect(self, context: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """ComfyUI's preprocess_text_embeds on unprocessed embeddings: the video and audio features each through
        their connector (the prompt's tokens, then the learnable registers from that position up to
        max(1024, tokens) rounded to whole register sets), normalised."""
        return (
            _run_connector(self.video_connector, context[..., : self.video_width]),
            _run_connector(self.audio_connector, context[..., self.video_width :]),
        )

    def forward(
        self,
        video: torch.Tensor,
        audio: torch.Tensor,
        t_video: torch.Tensor,
        t_audio: torch.Tensor,
        context: torch.Tensor,
        video_coords: torch.Tensor,
        audio_coords: torch.Tensor,
        num_guide_tokens: int = 0,
        unprocessed: bool = True,
        ref_audio: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Raw outputs for patchified video [B,Nv,128] and audio [B,Na,128] tokens at timesteps in sigma units
        ([B] or per token), the context [B,L,video+audio widths] (unprocessed: still to go through the connectors)
        and diffusers' coordinates; `ref_audio` as run_network takes it."""
        if unprocessed:
            v_ctx, a_ctx = self.connect(context)
        else:
            v_ctx, a_ctx = context[..., : self.video_width], context[..., self.video_width :]
        return run_network(
            self.network,
            video,
            audio,
            t_video,
            t_audio,
            (v_ctx, a_ctx),
            video_coords,
            audio_coords,
            num_guide_tokens,
            ref_audio,
            lambda block, *args: block(*args),
        )


def reference_audio_coords(rope: nn.Module, batch: int, tokens: int, device: torch.device) -> torch.Tensor:
    """The [B,1,L,2] times of L reference audio tokens placed just before the generated audio (ComfyUI's ID-LoRA
    convention): the usual latent times shifted back by the last one's end plus one latent's duration."""
    coords = rope.prepare_audio_coords(batch, tokens, device)
    latent_seconds = rope.scale_factors[0] * rope.hop_length / rope.sampling_rate
    return coords - (float(coords[0, 0, -1, 1]) + latent_seconds)


def run_network(
    net: LTX2VideoTransformer3DModel,
    video: torch.Tensor,
    audio: torch.Tensor,
    t_video: torch.Tensor,
    t_audio: torch.Tensor,
    ctx: tuple[torch.Tensor, torch.Tensor],
    video_coords: torch.Tensor,
    audio_coords: torch.Tensor,
    num_guide_tokens: int,
    ref_audio: torch.Tensor | None,
    run_block: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """diffusers' LTX-2 layers in the order of ComfyUI's LTXAVModel (timesteps embedded per token, the prompt
    modulation from each modality's largest timestep, the cross-modal gates from the other modality's largest).
    `ref_audio` (LTXVReferenceAudio's tokens [1 or B, L, 128]) goes before the audio tokens at timestep 0 and times
    before 0, and its outputs are dropped."""
    b, nv = video.shape[0], video.shape[1]
    dtype = video.dtype
    scale = net.config.timestep_scale_multiplier
    tv = _per_token(t_video, b, nv) * scale
    ta = _per_token(t_audio, b, audio.shape[1]) * scale
    n_ref = 0
    if ref_audio is not None:
        ref = ref_audio.to(audio)
        ref = ref.expand(b, -1, -1) if ref.shape[0] < b else ref
        n_ref = ref.shape[1]
        audio = torch.cat([ref, audio], dim=1)
        ref_coords = reference_audio_coords(net.audio_rope, b, n_ref, audio.device).to(audio_coords)
        audio_coords = torch.cat([ref_coords, audio_coords], dim=2)
        ta = torch.cat([ta.new_zeros(b, n_ref), ta], dim=1)
    pe = {
        "video": net.rope(video_coords, device=video.device),
        "audio": net.audio_rope(audio_coords, device=audio.device),
        "video_cross": net.cross_attn_rope(video_coords[:, 0:1, :], device=video.device),
        "audio_cross": net.cross_attn_audio_rope(audio_coords[:, 0:1, :], device=audio.device),
    }
    vx = net.proj_in(video)
    if net.config.use_keyframes_abs_pos_embedding:  # the tokens of the frame that starts at time 0
        first = video_coords[:, 0, :, 0] == 0
        if num_guide_tokens:
            first[:, -num_guide_tokens:] = False
        vx = vx + first.unsqueeze(-1).to(vx) * net.keyframes_abs_pos_embedding.to(vx)
    ax = net.audio_proj_in(audio)

    def embed(module: nn.Module, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mod, emb = module(t.flatten(), batch_size=b, hidden_dtype=dtype)
        return mod.view(b, -1, mod.shape[-1]), emb.view(b, -1, emb.shape[-1])

    gate_factor = net.config.cross_attn_timestep_scale_multiplier / scale
    temb = {
        "video": embed(net.time_embed, tv)[0],
        "audio": embed(net.audio_time_embed, ta)[0],
        "video_ca": embed(net.av_cross_attn_video_scale_shift, tv)[0],
        "audio_ca": embed(net.av_cross_attn_audio_scale_shift, ta)[0],
        "a2v_gate": embed(net.av_cross_attn_video_a2v_gate, ta.max().expand_as(tv) * gate_factor)[0],
        "v2a_gate": embed(net.av_cross_attn_audio_v2a_gate, tv.max().expand_as(ta) * gate_factor)[0],
        "prompt": None,
        "audio_prompt": None,
    }
    if hasattr(net, "prompt_adaln"):  # the prompt modulation follows each modality's largest timestep
        temb["prompt"] = embed(net.prompt_adaln, tv.max(dim=1).values)[0]
        temb["audio_prompt"] = embed(net.audio_prompt_adaln, ta.max(dim=1).values)[0]
    for block in net.transformer_blocks:
        vx, ax = run_block(block, vx, ax, ctx, temb, pe)
    v_emb = embed(net.time_embed, tv)[1]
    a_emb = embed(net.audio_time_embed, ta)[1]
    return _output(vx, v_emb, net.scale_shift_table, net.norm_out, net.proj_out), _output(
        ax[:, n_ref:], a_emb[:, n_ref:], net.audio_scale_shift_table, net.audio_norm_out, net.audio_proj_out
    )


def _output(x: torch.Tensor, emb: torch.Tensor, table: torch.Tensor, norm: nn.Module, proj: nn.Module) -> torch.Tensor:
    shift, scale = (table[None, None].to(x) + emb[:, :, None]).unbind(2)
    return proj(norm(x) * (1 + scale) + shift)


def _run_connector(side: LTX2ConnectorTransformer1d, x: torch.Tensor) -> torch.Tensor:
    tokens = x.shape[1]
    repeats = math.ceil(max(CONNECTOR_MIN_TOKENS, tokens) / CONNECTOR_REGISTERS)
    registers = side.learnable_registers.to(x).repeat(repeats, 1)[tokens:]
    x = torch.cat([x, registers.unsqueeze(0).expand(x.shape[0], -1, -1)], dim=1)
    rotary = side.rope(x.shape[0], x.shape[1], device=x.device)
    for block in side.transformer_blocks:
        x = block(x, attention_mask=None, rotary_emb=rotary)
    return side.norm_out(x)


def lora_targets(sd: Mapping[str, torch.Tensor]) -> LoraTargets:
    """The names an LTX-2.5 LoRA may give a layer, as ComfyUI reads them: the file's own under `diffusion_model.`
    (Lightricks' and ComfyUI's LoRAs, the connectors' too), kohya's `lora_unet_` with underscores, and diffusers'
    under `transformer.` for the network's layers."""
    targets = LoraTargets(("diffusion_model.", "lora_unet_", "transformer."), {})
    for ours, name in convert_state_dict({k: k for k in sd}).items():  # our name -> the file's
        if ours.endswith(".weight"):
            n = name[: -len(".weight")]
            aliases = ["diffusion_model." + n, "lora_unet_" + n.replace(".", "_")]
            if ours.startswith("network."):
                aliases.append("transformer." + ours[len("network.") : -len(".weight")])
            targets.add(ours, *aliases)
    return targets


@dataclass
class LTX25DiffusionModel(LTX2DiffusionModel):
    """LTX2DiffusionModel's step conventions (packed audio-video latents, per-token timesteps under a noise mask)
    on LTX25Network."""

    reads_unprocessed_embeds: ClassVar[bool] = True

    def forward_av(
        self,
        video: torch.Tensor,
        audio: torch.Tensor,
        t_video: torch.Tensor,
        t_audio: torch.Tensor,
        context: torch.Tensor,
        frame_rate: float,
        keyframe_idxs: torch.Tensor | None = None,
        unprocessed: bool = False,
        ref_audio: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """As LTX2DiffusionModel.forward_av; `context` holds the video then the audio features (`unprocessed`:
        the LTX-2.5 text encoder's, still to go through the connectors)."""
        module: LTX25Network = self.module
        b, c, frames, h, w = video.shape
        device, dtype = video.device, self.dtype
        rope = module.network.rope
        coords = video_coords(rope, video.shape, frame_rate, keyframe_idxs, device)
        widths = module.video_width + module.network.config.audio_cross_attention_dim
        if not unprocessed and context.shape[-1] != widths:
            raise ValueError(
                f"the context is {context.shape[-1]} wide; LTX-2.5's transformer takes its text encoder's embeddings "
                f"(Gemma 4 with its projection) or processed ones {widths} wide"
            )
        out, audio_out = module(
            video.to(dtype).flatten(2).transpose(1, 2),
            audio.to(dtype).transpose(1, 2).flatten(2),
            t_video.to(device, torch.float32),
            t_audio.to(device, torch.float32),
            context.to(device, dtype),
            coords,
            module.network.audio_rope.prepare_audio_coords(b, audio.shape[2], device),
            num_guide_tokens=0 if keyframe_idxs is None else keyframe_idxs.shape[2],
            unprocessed=unprocessed,
            ref_audio=None if ref_audio is None else ref_audio.to(device, dtype),
        )
        v = out.transpose(1, 2).reshape(b, c, frames, h, w)
        a = audio_out.reshape(b, audio.shape[2], AUDIO_CHANNELS, AUDIO_BINS).transpose(1, 2)
        return v.float(), a.float()


def load_diffusion_model(
    ref: ModelRef, sd: Mapping[str, torch.Tensor], config: Mapping[str, Any]
) -> LTX25DiffusionModel:
    """The network of an LTX-2.3/2.5 transformer file (`sd` without its prefix, `config` ComfyUI's dit_config);
    float32 compute, as ComfyUI runs it on a CPU."""
    path = ref.sources[0] if ref.sources else None
    try:
        config = full_config(config, sd)
        diffusers_kwargs(config)  # refused settings are named before the weights are read
    except (KeyError, ValueError) as e:
        raise ModelLoadError(path, f"not a usable LTX-2.5 audio-video model: {e}") from None
    if comfy_quant.is_quantized(sd):  # the published *-comfy-int8-convrot files: float weights once, at load
        sd = comfy_quant.dequantize(sd, path, torch.float32)
    converted = convert_state_dict({k: v.float() for k, v in sd.items()})
    if ref.patches:
        converted, _ = merge_loras(ref.patches, lora_targets(sd), converted)
    module = build_module(lambda: LTX25Network(config), converted, path, "LTX-2.5 transformer")
    return LTX25DiffusionModel(
        arch="ltx2",
        module=module,
        latent_format=latent_format("ltx2"),
        sampling=dict(sampling_config("ltx2")),
        config=config,
    )
