"""Record what the newest ComfyUI's Anima LLLite code computes on the tiny Anima DiT and the tiny LLLite files
(nodes/models/anima_demo.py, nodes/models/anima_lllite_demo.py), as tests/models/fixtures/comfyui_anima_lllite.json.xz.

No ComfyUI that runs here has the LLLite (comfy/ldm/anima/lllite.py, newer than 0.10.0), so its module is run at
development time on top of upstream 0.10.0 (commit 79cdbc81 of hiddenswitch/ComfyUI, the base these recorders use);
nothing of ComfyUI is copied here. Run inside that ComfyUI's environment after `comfy-cluster demo-models`, with a
folder holding the newest ComfyUI's comfy/ldm/anima/lllite.py (read at 773ef1b3) as comfy_ldm_anima_lllite.py:

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<site>:. OMP_NUM_THREADS=1 <venv>/bin/python \\
        /work/main/scripts/record_comfyui_anima_lllite.py <fixture> <workspace> <folder of the newest file>

The LLLite network is built as the newest ModelPatchLoader builds it (AnimaLLLite(state_dict, metadata) with
manual_cast operations in the file's dtype, then load_state_dict), and AnimaLLLiteApply's three patch objects are
made as the newest node makes them. 0.10.0's MiniTrainDIT has none of the patch points they use, so this script
calls them where the newest comfy/ldm/cosmos/predict2.py (523fba4d) does: the latent padded to whole patches (and the
output cropped back), the post_input patch once before the blocks on the padded latent with a fresh model_patch_data; transformer_options' block_index set before each block;
attn1/attn2 patches on the attention's inputs (q, k, v: the normed tokens, for cross-attention k and v the context)
before the projections; the mlp patch on the normed tokens [B,T,H,W,D] before the feed-forward; sigmas in
transformer_options. The tiny sizes are given to 0.10.0's classes as scripts/record_comfyui_anima.py does.
Recorded: percent_to_sigma of Anima's model sampling for a few percents, and per case the DiT's output with and
without the patch on seeded inputs."""

from __future__ import annotations

import importlib.util
import sys

import torch
from comfyui_recording import b64, comfyui_on_cpu, sha256, tiny_anima_in_comfyui, write_json

OUT, WORKSPACE, UPSTREAM = sys.argv[1:4]
comfyui_on_cpu()
import comfy.ldm.anima.model
import comfy.ldm.cosmos.predict2 as predict2
import comfy.model_detection
import comfy.ops
import comfy.sd
import comfy.utils

COMMIT = "79cdbc81"
DIT = "diffusion_models/anima_tiny.safetensors"
ANY = "model_patches/anima_lllite_any_tiny.safetensors"
INPAINT = "model_patches/anima_lllite_inpainting_tiny.safetensors"
PERCENTS = [0.0, 0.2, 0.5, 0.7, 1.0]
# (file, seed, latent shape, image [B,H,W], mask?, strength, start %, end %, sigma)
CASES = {
    "any": (ANY, 1, [1, 16, 1, 8, 6], [1, 40, 56], False, 0.8, 0.0, 1.0, 0.6),
    "any_batch_two_odd": (ANY, 2, [2, 16, 1, 5, 7], [1, 48, 48], False, 1.0, 0.0, 1.0, 0.9),
    "any_outside_window": (ANY, 3, [1, 16, 1, 6, 6], [1, 48, 48], False, 1.0, 0.5, 1.0, 0.9),
    "inpaint": (INPAINT, 4, [1, 16, 1, 6, 8], [1, 50, 60], True, 1.0, 0.0, 1.0, 0.5),
    "inpaint_no_mask": (INPAINT, 5, [1, 16, 1, 6, 6], [1, 48, 48], False, -0.7, 0.0, 0.7, 0.8),
}


def load_lllite_module():
    spec = importlib.util.spec_from_file_location("comfy.ldm.anima.lllite", f"{UPSTREAM}/comfy_ldm_anima_lllite.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def tiny_dit() -> None:
    tiny_anima_in_comfyui(f"{WORKSPACE}/models/{DIT}")


def patch_points() -> None:
    """The newest predict2's patch points on 0.10.0's classes (see the module's docstring)."""
    attention_forward = predict2.Attention.forward
    mlp_forward = predict2.GPT2FeedForward.forward
    block_forward = predict2.Block.forward
    dit_forward = predict2.MiniTrainDIT._forward

    def attention(self, x, context=None, rope_emb=None, transformer_options={}):  # noqa: B006 (ComfyUI's signature)
        patches = transformer_options.get("patches", {}).get("attn1_patch" if self.is_selfattn else "attn2_patch")
        if not patches:
            return attention_forward(self, x, context, rope_emb=rope_emb, transformer_options=transformer_options)
        ctx = x if context is None else context
        q_in, k_in, v_in = x, ctx, ctx
        extra = {**transformer_options, "n_heads": self.n_heads, "dim_head": self.head_dim}
        for patch in patches:
            out = patch(q_in, k_in, v_in, pe=rope_emb, attn_mask=None, extra_options=extra)
            q_in, k_in, v_in = out.get("q", q_in), out.get("k", k_in), out.get("v", v_in)
        swaps = [
            proj.register_forward_pre_hook(lambda _m, _a, t=t: (t,))
            for proj, t in ((self.q_proj, q_in), (self.k_proj, k_in), (self.v_proj, v_in))
        ]
        try:
            return attention_forward(self, x, context, rope_emb=rope_emb, transformer_options=transformer_options)
        finally:
            for s in swaps:
                s.remove()

    def mlp(self, x):
        options = self.transformer_options
        for patch in options.get("patches", {}).get("mlp_patch", []):
            x = patch({"x": x, "transformer_options": options})["x"]
        return mlp_forward(self, x)

    def block(self, x, *args, transformer_options={}, **kwargs):  # noqa: B006 (ComfyUI's signature)
        transformer_options["block_index"] = self.block_index
        self.mlp.transformer_options = transformer_options
        return block_forward(self, x, *args, transformer_options=transformer_options, **kwargs)

    def dit(self, x, timesteps, context, fps=None, padding_mask=None, **kwargs):
        options = kwargs.get("transformer_options", {})
        for i, b in enumerate(self.blocks):
            b.block_index = i
        size = x.shape[-3:]
        x = comfy.ldm.common_dit.pad_to_patch_size(x, (self.patch_temporal, self.patch_spatial, self.patch_spatial))
        if "post_input" in options.get("patches", {}):
            options = {**options, "model_patch_data": {}}
            for patch in options["patches"]["post_input"]:
                patch({"img": None, "x": x, "transformer_options": options})
        out = dit_forward(self, x, timesteps, context, fps, padding_mask, **{**kwargs, "transformer_options": options})
        return out[:, :, : size[0], : size[1], : size[2]]

    predict2.Attention.forward = attention
    predict2.GPT2FeedForward.forward = mlp
    predict2.Block.forward = block
    predict2.MiniTrainDIT._forward = dit


class ModelPatch:
    """What AnimaLLLitePatch reads of the newest ModelPatchLoader's output: its `.model`."""

    def __init__(self, model):
        self.model = model


def load_patch(lllite, name: str) -> ModelPatch:
    sd, metadata = comfy.utils.load_torch_file(f"{WORKSPACE}/models/{name}", safe_load=True, return_metadata=True)
    model = lllite.AnimaLLLite(sd, metadata, dtype=comfy.utils.weight_dtype(sd), operations=comfy.ops.manual_cast)
    model.load_state_dict(sd)
    return ModelPatch(model)


def inputs(seed: int, shape: list[int], image: list[int], masked: bool, width: int):
    """(x, Qwen3 states, T5 ids, image, mask or None) from one generator in this order (the test draws them alike)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g)
    states = torch.randn(1, 5, width, generator=g)
    t5 = torch.randint(0, 32128, (4,), generator=g)
    pixels = torch.rand(*image, 3, generator=g)
    mask = (torch.rand(*image, generator=g) > 0.6).float() if masked else None
    return x, states, t5, pixels, mask


def main() -> None:
    torch.set_num_threads(1)
    lllite = load_lllite_module()
    tiny_dit()
    patch_points()
    model = comfy.sd.load_diffusion_model(f"{WORKSPACE}/models/{DIT}").model
    ms = model.model_sampling
    out = {
        "comfyui_commit": COMMIT,
        "lllite_source": "comfy/ldm/anima/lllite.py at 773ef1b3",
        "recorded_by": "scripts/record_comfyui_anima_lllite.py",
        "files": {p: sha256(f"{WORKSPACE}/models/{p}") for p in (DIT, ANY, INPAINT)},
        "percent_to_sigma": {str(p): float(ms.percent_to_sigma(p)) for p in PERCENTS},
        "cases": {},
    }
    patches = {name: load_patch(lllite, name) for name in (ANY, INPAINT)}
    width = model.diffusion_model.llm_adapter.blocks[0].cross_attn.k_proj.weight.shape[1]
    for case, (name, seed, shape, image, masked, strength, start, end, sigma) in CASES.items():
        x, states, t5, pixels, mask = inputs(seed, shape, image, masked, width)
        model_patch = patches[name]
        if model_patch.model.cond_in_channels == 4 and mask is None:  # AnimaLLLiteApply's zero mask
            mask = torch.zeros_like(pixels[..., 0])
        patch = lllite.AnimaLLLitePatch(
            model_patch, pixels, mask, strength, float(ms.percent_to_sigma(start)), float(ms.percent_to_sigma(end))
        )
        self_targets = {"q": "self_attn_q_proj", "k": "self_attn_k_proj", "v": "self_attn_v_proj"}
        options = {
            "sigmas": torch.tensor([sigma] * shape[0]),
            "patches": {
                "post_input": [patch],
                "attn1_patch": [lllite.AnimaLLLiteAttentionPatch(patch, self_targets)],
                "attn2_patch": [lllite.AnimaLLLiteAttentionPatch(patch, {"q": "cross_attn_q_proj"})],
                "mlp_patch": [lllite.AnimaLLLiteMLPPatch(patch)],
            },
        }
        t = torch.tensor([sigma] * shape[0])
        with torch.no_grad():
            conds = model.extra_conds(cross_attn=states, t5xxl_ids=t5, device=torch.device("cpu"), noise=x)
            context = conds["c_crossattn"].cond.expand(shape[0], -1, -1)
            plain = model.diffusion_model(x, t, context)
            patched = model.diffusion_model(x, t, context, transformer_options=options)
        out["cases"][case] = {"plain": b64(plain), "patched": b64(patched)}
        print(case, float((patched - plain).abs().max()))
    write_json(OUT, out)


if __name__ == "__main__":
    main()
