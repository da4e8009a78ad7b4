"""krea2-tiny: a deterministic tiny Krea 2 transformer written in the layout Comfy-Org/Krea-2 publishes (Krea's own
names: `first.`, `tmlp.`, `tproj.1.`, `txtmlp.`, `txtfusion.`, `blocks.N.attn.wq/wk/wv/wo/gate`, `.mod.lin` as one
flattened six-row vector, `last.`), as diffusion_models/krea2_turbo_tiny.safetensors: 2 blocks of 2 heads 16 wide
(grouped query: 1 key/value head), text fusion over 3 tapped layers 32 wide. The text encoder and VAE of the
template (Qwen3-VL 4B, Qwen-Image's VAE) are not built here. Same seed -> byte-identical file."""
from __future__ import annotations

from pathlib import Path

import torch
from diffusers import Krea2Transformer2DModel
from safetensors.torch import save_file

from nodes.models.flux_demo import randomize_constants
from nodes.models.krea2 import to_diffusers_layout
from nodes.output_claims import write_atomic

SEED = 2
FILE = "diffusion_models/krea2_turbo_tiny.safetensors"
CONFIG = {"in_channels": 64, "num_layers": 2, "attention_head_dim": 16, "num_attention_heads": 2,
          "num_key_value_heads": 1, "intermediate_size": 48, "timestep_embed_dim": 32, "text_hidden_dim": 32,
          "num_text_layers": 3, "text_num_attention_heads": 2, "text_num_key_value_heads": 2,
          "text_intermediate_size": 48, "num_layerwise_text_blocks": 2, "num_refiner_text_blocks": 2,
          "axes_dims_rope": (4, 6, 6)}
# diffusers' name -> Krea's, the inverse of diffusers' convert_krea2_transformer_checkpoint_to_diffusers.
_PREFIXES = {"img_in.": "first.", "time_embed.linear_1.": "tmlp.0.", "time_embed.linear_2.": "tmlp.2.",
             "time_mod_proj.": "tproj.1.", "txt_in.norm.weight": "txtmlp.0.scale", "txt_in.linear_1.": "txtmlp.1.",
             "txt_in.linear_2.": "txtmlp.3.", "text_fusion.": "txtfusion.", "transformer_blocks.": "blocks.",
             "final_layer.linear.": "last.linear.", "final_layer.norm.weight": "last.norm.scale",
             "final_layer.scale_shift_table": "last.modulation.lin"}
_INNER = {".attn.to_q.": ".attn.wq.", ".attn.to_k.": ".attn.wk.", ".attn.to_v.": ".attn.wv.",
          ".attn.to_out.0.": ".attn.wo.", ".attn.to_gate.": ".attn.gate.", ".attn.norm_q.weight": ".attn.qknorm.qnorm.scale",
          ".attn.norm_k.weight": ".attn.qknorm.knorm.scale", ".ff.": ".mlp.", ".norm1.weight": ".prenorm.scale",
          ".norm2.weight": ".postnorm.scale", ".scale_shift_table": ".mod.lin"}


def to_published(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Krea2Transformer2DModel tensors -> the published file's; nodes.models.krea2 must map them back."""
    out = {}
    for key, value in sd.items():
        new = key
        for old, repl in _PREFIXES.items():
            if new.startswith(old):
                new = repl + new[len(old):]
                break
        for old, repl in _INNER.items():
            new = new.replace(old, repl)
        if new.startswith("blocks.") and new.endswith(".mod.lin"):
            value = value.reshape(-1)    # the file keeps each block's six modulation rows flattened
        out[new] = value.contiguous()
    back = to_diffusers_layout(dict(out))
    if back.keys() != sd.keys() or any(back[k].shape != sd[k].shape for k in sd):
        raise AssertionError("the Krea 2 layout does not convert back")
    return out


def tiny_transformer() -> Krea2Transformer2DModel:
    gen = torch.Generator().manual_seed(SEED)
    torch.manual_seed(SEED)
    model = Krea2Transformer2DModel(**CONFIG)
    randomize_constants(model, gen)   # zero-initialised norms and tables would hide a swapped name
    return model.eval()


def build_demo_krea2(models_dir: str | Path) -> list[Path]:
    """Write the tiny Krea 2 transformer under models_dir; returns the paths written."""
    path = Path(models_dir) / FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    sd = to_published({k: v.detach() for k, v in tiny_transformer().state_dict().items()})
    write_atomic(path, lambda tmp: save_file(sd, str(tmp)))
    return [path]
