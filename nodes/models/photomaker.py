"""PhotoMaker (TencentARC, v1): the ID encoder of photomaker-v1.bin (its `id_encoder` dict; the `lora_weights`
beside it are not read, as ComfyUI does not read them) as ComfyUI's comfy_extras.nodes_photomaker runs it.

A CLIP ViT-L vision tower with its projection (`vision_model.*`, `visual_projection.weight`: transformers' names,
built by nodes.models.clip_vision, float16 weights computed in float32 as ComfyUI keeps them), a second projection
(`visual_projection_2.weight`) and the fuse module (`fuse_module.mlp1/mlp2/layer_norm`). The pooled image state is
projected twice and joined (768 + 1280 = SDXL's 2048-wide prompt states); the fuse module mixes it into the prompt
state of the class word in front of the trigger word: an MLP of the pair added to the prompt state, a residual MLP,
a layer norm. Sizes come from the tensors."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import nn

from nodes.models.errors import ModelLoadError

ID_ENCODER = "id_encoder"
MARKER = "fuse_module.mlp1.fc1.weight"


class FuseMLP(nn.Module):
    """Layer norm, Linear, GELU, Linear; the input added back when `residual`."""

    def __init__(self, cin: int, cout: int, hidden: int, residual: bool) -> None:
        super().__init__()
        self.layernorm = nn.LayerNorm(cin)
        self.fc1 = nn.Linear(cin, hidden)
        self.fc2 = nn.Linear(hidden, cout)
        self.residual = residual

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc2(nn.functional.gelu(self.fc1(self.layernorm(x))))
        return y + x if self.residual else y


class FuseModule(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.mlp1 = FuseMLP(2 * width, width, width, residual=False)
        self.mlp2 = FuseMLP(width, width, width, residual=True)
        self.layer_norm = nn.LayerNorm(width)

    def forward(self, prompt_states: torch.Tensor, id_states: torch.Tensor) -> torch.Tensor:
        fused = self.mlp1(torch.cat([prompt_states, id_states], dim=-1)) + prompt_states
        return self.layer_norm(self.mlp2(fused))


@dataclass
class PhotoMakerIDEncoder:
    tower: nn.Module  # transformers' CLIPVisionModelWithProjection
    projection_2: nn.Linear
    fuse: FuseModule

    @torch.no_grad()
    def apply(self, pixel_values: torch.Tensor, prompt_embeds: torch.Tensor, class_token: int) -> torch.Tensor:
        """The prompt states [1,T,D] with the class token's row fused with each image's identity (one image: the
        row once; ComfyUI's node gives one id image)."""
        device = next(self.tower.parameters()).device
        pooled = self.tower.vision_model(pixel_values=pixel_values.to(device).float()).pooler_output
        ids = torch.cat([self.tower.visual_projection(pooled), self.projection_2(pooled)], dim=-1)
        out = prompt_embeds.to(device).float().clone()
        if ids.shape[-1] != out.shape[-1]:
            raise ValueError(
                f"the PhotoMaker model's identity is {ids.shape[-1]} wide, the prompt's states {out.shape[-1]} "
                "(PhotoMaker v1 is for SDXL's CLIP-L + CLIP-G)"
            )
        if not 0 <= class_token < out.shape[1]:
            raise ValueError(f"the class word's token {class_token} is outside the prompt's {out.shape[1]} tokens")
        out[:, class_token] = self.fuse(out[:, class_token], ids[:1].to(out.dtype))
        return out


def read_photomaker_file(path: str, digest: str | None = None) -> dict[str, torch.Tensor]:
    """The ID encoder's tensors of a PhotoMaker file: photomaker-v1.bin (a torch pickle, read without running
    code: tensors only) with its `id_encoder` dict, or a safetensors file holding them at the top level."""
    if path.endswith(".safetensors"):
        from nodes.models.safetensors_io import load_state_dict

        data: Mapping = load_state_dict(path, digest)
    else:
        try:
            data = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as e:  # a pickle with code in it, or no torch file at all
            raise ModelLoadError(path, f"is not a PhotoMaker file torch can read as tensors only: {e}") from None
    if isinstance(data, Mapping) and ID_ENCODER in data:
        data = data[ID_ENCODER]
    if not isinstance(data, Mapping) or MARKER not in data:
        raise ModelLoadError(path, "is not a PhotoMaker v1 model (no id_encoder with fuse_module weights)")
    return dict(data)


def load_photomaker(sd: Mapping[str, torch.Tensor], path: str | None = None) -> PhotoMakerIDEncoder:
    from nodes.models.clip_vision import load_clip_vision
    from nodes.models.safetensors_io import build_module

    try:
        width = int(sd["fuse_module.layer_norm.weight"].shape[0])
        proj2 = sd["visual_projection_2.weight"]
    except KeyError as e:
        raise ModelLoadError(path, f"incomplete PhotoMaker model: tensor {e.args[0]} is missing") from None
    tower = load_clip_vision(
        {k: v for k, v in sd.items() if k.startswith(("vision_model.", "visual_projection."))}, path
    )
    projection_2 = build_module(
        lambda: nn.Linear(proj2.shape[1], proj2.shape[0], bias=False).requires_grad_(False),
        {"weight": proj2.float()},
        path,
        "PhotoMaker second projection",
    )
    fuse_sd = {k[len("fuse_module.") :]: v.float() for k, v in sd.items() if k.startswith("fuse_module.")}
    fuse = build_module(lambda: FuseModule(width).requires_grad_(False), fuse_sd, path, "PhotoMaker fuse module")
    return PhotoMakerIDEncoder(tower.module, projection_2, fuse)


def without_word(tokens: dict[str, list], text: str, tokenizers: dict, word: int) -> dict[str, list]:
    """PhotoMakerEncode's token filter: the tokens of word `word` (ComfyUI's 1-based word ids; in ComfyUI 0.3.64
    a word is a weighted segment of the prompt, or an embedding) removed from each sub-encoder's chunk, which is
    padded back to its length with its last token. Only a prompt of one chunk can be fused (ComfyUI's class-token
    mask is one chunk long), so longer ones are refused."""
    from nodes.models.tokenizer import escape_parens, parse_weights, unescape_parens

    segments = [unescape_parens(s) for s, _ in parse_weights(escape_parens(text))]
    out = {}
    for name, chunks in tokens.items():
        tok = tokenizers[name]
        groups = [tok.bpe.encode(s) for s in segments if s != ""]
        flat = [t for g in groups for t in g]
        if len(chunks) != 1 or [t for t, _ in chunks[0][1 : 1 + len(flat)]] != flat:
            raise ValueError("text: PhotoMakerEncode fuses the identity into a prompt of one chunk (75 tokens)")
        word_ids = [0] + [i + 1 for i, g in enumerate(groups) for _ in g]
        word_ids += [0] * (len(chunks[0]) - len(word_ids))
        kept = [t for t, w in zip(chunks[0], word_ids) if w != word]
        out[name] = [kept + [chunks[0][-1]] * (len(chunks[0]) - len(kept))]
    return out
