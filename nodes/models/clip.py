"""CLIP text encoders with ComfyUI's semantics: key layouts (ldm, HF transformers, OpenCLIP), configs
from shapes, and encoding with prompt weights, clip skip and pooled outputs.

`ClipSide` is one tokenizer + encoder pair (CLIP-L, CLIP-G, OpenCLIP-H); `ClipTextEncoder` combines sides
as SD1, SD2 and SDXL do. Other architectures (Flux: CLIP-L + T5) reuse `ClipSide` and `build_clip`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from .components import TextEncoder
from .errors import ModelLoadError
from .safetensors_io import build_module
from .text_encoder_dtype import text_encoder_compute_dtype
from .tokenizer import SDTokenizer, TokenWeights

IGNORED = ("logit_scale", "position_ids", "attn_mask")


def clip_heads(hidden: int) -> int:
    """Attention heads are not in the weights: real CLIPs use 64-wide heads; tiny ones 8-wide."""
    head_dim = 64 if hidden % 64 == 0 else 8 if hidden % 8 == 0 else hidden
    return hidden // head_dim


def hf_keys(sd: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Keys under `prefix` in HF transformers layout, normalised to the flattened CLIPTextModel names
    (no `text_model.`), plus `text_projection.weight` when present. Non-weights are dropped."""
    out = {}
    for k, v in sd.items():
        if not k.startswith(prefix):
            continue
        k = k[len(prefix) :]
        if k.startswith("text_model."):
            k = k[len("text_model.") :]
        if k.split(".")[-1] in IGNORED:
            continue
        out[k] = v
    return out


def is_open_clip_layout(keys) -> bool:
    return any(k.endswith("transformer.resblocks.0.attn.in_proj_weight") for k in keys)


def open_clip_to_hf(sd: dict[str, torch.Tensor], prefix: str = "") -> dict[str, torch.Tensor]:
    """OpenCLIP text tower (SDXL's CLIP-G, SD2's CLIP-H) -> flattened HF CLIP names."""
    simple = {
        "token_embedding.weight": "embeddings.token_embedding.weight",
        "positional_embedding": "embeddings.position_embedding.weight",
        "ln_final.weight": "final_layer_norm.weight",
        "ln_final.bias": "final_layer_norm.bias",
    }
    inner = {
        "ln_1": "layer_norm1",
        "ln_2": "layer_norm2",
        "attn.out_proj": "self_attn.out_proj",
        "mlp.c_fc": "mlp.fc1",
        "mlp.c_proj": "mlp.fc2",
    }
    out = {}
    for k, v in sd.items():
        if not k.startswith(prefix):
            continue
        k = k[len(prefix) :]
        if k in simple:
            out[simple[k]] = v
        elif k == "text_projection":
            out["text_projection.weight"] = v.t().contiguous()
        elif k.startswith("transformer.resblocks."):
            i, rest = k[len("transformer.resblocks.") :].split(".", 1)
            base = f"encoder.layers.{i}."
            if rest.startswith("attn.in_proj_"):
                for name, part in zip(("q_proj", "k_proj", "v_proj"), v.chunk(3, dim=0)):
                    out[f"{base}self_attn.{name}.{rest.rsplit('_', 1)[1]}"] = part.contiguous()
            else:
                mod, _, leaf = rest.rpartition(".")
                out[base + inner.get(mod, mod) + "." + leaf] = v
        elif k.split(".")[-1] not in IGNORED:
            out[k] = v
    return out


def hf_to_open_clip(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Inverse of open_clip_to_hf (to write checkpoints in the layout SDXL files have)."""
    simple = {
        "embeddings.token_embedding.weight": "token_embedding.weight",
        "embeddings.position_embedding.weight": "positional_embedding",
        "final_layer_norm.weight": "ln_final.weight",
        "final_layer_norm.bias": "ln_final.bias",
    }
    inner = {
        "layer_norm1": "ln_1",
        "layer_norm2": "ln_2",
        "self_attn.out_proj": "attn.out_proj",
        "mlp.fc1": "mlp.c_fc",
        "mlp.fc2": "mlp.c_proj",
    }
    sd = hf_keys(sd)
    out: dict[str, torch.Tensor] = {}
    layers = 1 + max(int(k.split(".")[2]) for k in sd if k.startswith("encoder.layers."))
    for i in range(layers):
        b = f"encoder.layers.{i}.self_attn."
        for leaf in ("weight", "bias"):
            out[f"transformer.resblocks.{i}.attn.in_proj_{leaf}"] = torch.cat(
                [sd[f"{b}{n}.{leaf}"] for n in ("q_proj", "k_proj", "v_proj")]
            )
    for k, v in sd.items():
        if k in simple:
            out[simple[k]] = v
        elif k == "text_projection.weight":
            out["text_projection"] = v.t().contiguous()
        elif k.startswith("encoder.layers.") and ".self_attn." in k and "out_proj" not in k:
            continue
        else:
            i, rest = k[len("encoder.layers.") :].split(".", 1)
            mod, _, leaf = rest.rpartition(".")
            out[f"transformer.resblocks.{i}.{inner.get(mod, mod)}.{leaf}"] = v
    return out


def clip_config(sd: dict[str, Any], hidden_act: str, path: str | None = None):
    """CLIPTextConfig from flattened HF key shapes."""
    from transformers import CLIPTextConfig

    try:
        vocab, hidden = sd["embeddings.token_embedding.weight"].shape
        layers = 0
        while f"encoder.layers.{layers}.mlp.fc1.weight" in sd:
            layers += 1
        proj = sd.get("text_projection.weight")
        return CLIPTextConfig(
            vocab_size=vocab,
            hidden_size=hidden,
            intermediate_size=sd["encoder.layers.0.mlp.fc1.weight"].shape[0],
            num_hidden_layers=layers,
            num_attention_heads=clip_heads(hidden),
            max_position_embeddings=sd["embeddings.position_embedding.weight"].shape[0],
            projection_dim=proj.shape[0] if proj is not None else hidden,
            hidden_act=hidden_act,
            bos_token_id=vocab - 2,
            eos_token_id=vocab - 1,
            pad_token_id=vocab - 1,
        )
    except KeyError as e:
        raise ModelLoadError(path, f"incomplete CLIP text encoder: tensor {e.args[0]} is missing") from None


def build_clip(sd: dict[str, torch.Tensor], hidden_act: str, path: str | None, what: str = "text encoder"):
    """CLIPTextModel (or ...WithProjection when the weights carry a projection) from flattened HF keys."""
    from transformers import CLIPTextModel, CLIPTextModelWithProjection

    cfg = clip_config(sd, hidden_act, path)
    if "text_projection.weight" in sd:
        weights = {("" if k == "text_projection.weight" else "text_model.") + k: v for k, v in sd.items()}
        return build_module(
            lambda: CLIPTextModelWithProjection(cfg), weights, path, what, dtype=text_encoder_compute_dtype()
        )
    return build_module(lambda: CLIPTextModel(cfg), sd, path, what, dtype=text_encoder_compute_dtype())


@dataclass(frozen=True)
class ClipSpec:
    """How ComfyUI runs one CLIP: padding, default layer, final norm on hidden layers, pooled kind."""

    name: str
    hidden_act: str = "quick_gelu"
    pad_with_end: bool = True
    default_layer: int | None = None  # None: the last layer's final-normed output
    layer_norm_hidden: bool = True
    projected_pooled: bool = False
    # ComfyUI's enable_attention_masks: no token attends to the pads after the first end token
    mask_after_end: bool = False


class ClipSide:
    """One tokenizer + CLIP encoder run as ComfyUI's SDClipModel + ClipTokenWeightEncoder."""

    def __init__(self, module: torch.nn.Module, tokenizer: SDTokenizer, spec: ClipSpec) -> None:
        self.module, self.tokenizer, self.spec = module, tokenizer, spec
        self.text_model = getattr(module, "text_model", module)
        self.num_layers = len(self.text_model.encoder.layers)

    def tokenize(self, text: str) -> TokenWeights:
        return self.tokenizer.tokenize_with_weights(text)

    @torch.no_grad()
    def forward_ids(self, ids: torch.Tensor, layer: int | None) -> tuple[torch.Tensor, torch.Tensor]:
        """(hidden states [N,T,D] of the chosen layer, pooled [N,P]) for token rows."""
        idx = self.spec.default_layer if layer is None else layer
        ids = ids.to(next(self.module.parameters()).device)  # token ids are made on the CPU
        mask = None
        if self.spec.mask_after_end:
            ends = (ids == self.tokenizer.end).int()
            mask = ((ends.cumsum(-1) - ends) == 0).long()  # up to and including the first end token
        out = self.text_model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
        last = out.last_hidden_state
        if idx is None or abs(idx) > self.num_layers:
            z = last
        else:
            z = out.hidden_states[idx if idx < 0 else idx + 1]  # hidden_states[0] is the embedding
            if self.spec.layer_norm_hidden:
                z = self.text_model.final_layer_norm(z)
        # Pooled: the final-normed state at the first end token (ComfyUI counts tokens up to it).
        first_end = (ids == self.tokenizer.end).int().argmax(dim=-1)
        pooled = last[torch.arange(ids.shape[0], device=last.device), first_end]
        if self.spec.projected_pooled and hasattr(self.module, "text_projection"):
            pooled = self.module.text_projection(pooled)
        return z.float(), pooled.float()

    def encode(self, token_weights: TokenWeights, layer: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Chunks -> (cond [1, 77*chunks, D], pooled [1, P]); weights w != 1 move a token's state away from
        the empty prompt's state: (z - z_empty) * w + z_empty, as ComfyUI does."""
        rows = [[t for t, _ in chunk] for chunk in token_weights]
        weighted = any(w != 1.0 for chunk in token_weights for _, w in chunk)
        width = max((len(r) for r in rows), default=0)
        if weighted or not rows:
            rows.append(self.tokenizer.empty_tokens(width or self.tokenizer.max_length))
        z, pooled = self.forward_ids(torch.tensor(rows, dtype=torch.long), layer)
        if not token_weights:
            return z[-1:], pooled[:1]
        parts = []
        for k, chunk in enumerate(token_weights):
            zk = z[k : k + 1].clone()
            if weighted:
                w = torch.tensor([w for _, w in chunk], dtype=zk.dtype, device=zk.device).reshape(1, -1, 1)
                zk = (zk - z[-1:]) * w + z[-1:]
            parts.append(zk)
        return torch.cat(parts, dim=-2), pooled[:1]


@dataclass
class ClipTextEncoder(TextEncoder):
    """SD1 (CLIP-L), SD2 (OpenCLIP-H) and SDXL (CLIP-L + CLIP-G, hidden states concatenated)."""

    sides: dict[str, ClipSide] = field(default_factory=dict)
    patched_weights: int = 0  # LoRA weights merged on load

    def tokenize(self, text: str) -> dict[str, TokenWeights]:
        return {name: side.tokenize(text) for name, side in self.sides.items()}

    def encode(self, tokens: dict[str, TokenWeights]) -> tuple[torch.Tensor, torch.Tensor | None]:
        out = {name: side.encode(tokens[name], self.layer) for name, side in self.sides.items()}
        if self.arch == "sdxl":
            (zl, _), (zg, pooled) = out["l"], out["g"]
            cut = min(zl.shape[1], zg.shape[1])
            return torch.cat([zl[:, :cut], zg[:, :cut]], dim=-1), pooled
        ((z, pooled),) = out.values()
        return z, pooled
