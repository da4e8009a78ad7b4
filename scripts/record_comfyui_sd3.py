"""Record what ComfyUI 0.3.64 computes with the tiny SD3 demo model's weights, as a fixture for our SD3 support.

Run inside ComfyUI's own environment (it imports ComfyUI's modules; nothing of ComfyUI is copied here), after
`comfy-cluster demo-models` (or nodes.models.sd3_demo.build_demo_sd3) wrote the tiny SD3 files:

    cd <ComfyUI source> && PYTHONPATH=<site>:. OMP_NUM_THREADS=2 <ComfyUI venv>/bin/python \
        /work/main/scripts/record_comfyui_sd3.py /work/main/tests/nodes/fixtures/comfyui_sd3.json.xz <models dir>

- mmdit: ComfyUI's own model detection (detect_unet_config) reads the tiny checkpoint's MMDiT config; its
  MMDiT class is built with it, loads the weights strictly and runs forward passes on seeded inputs (even and
  odd latent sizes, batch of two timesteps), plainly and with one joint block replaced by a pass-through
  (what SkipLayerGuidanceSD3 does in its extra prediction).
- text: ComfyUI's SDClipModel (CLIP-L, CLIP-G settings of SD3ClipModel) and T5 are built with the tiny
  encoders' sizes, load the tiny weights, and ComfyUI's SD3ClipModel.encode_token_weights combines them on
  fixed token lists (plain, weighted, uneven chunks, empty T5, empty CLIPs, nothing at all; and weighted with
  CLIPSetLastLayer's option -3).
- denoised: ComfyUI's whole SD3 model (model_base.SD3) on the weights: apply_model's denoised prediction at
  one sigma, and the SD3 latent format's process_in/out.
- controlnet: ComfyUI's SD3 ControlNet on the tiny ControlNet file: block outputs for a seeded latent hint,
  the MMDiT with them as control, and the hint latent scaling.
- sampling: ComfyUI's SD3 model sampling (discrete flow, shift 3.0): sigma range, timesteps, percent_to_sigma.
Outputs are stored as float32 base64 (4096-wide text states as a digest: see cond_digest); seeded inputs are
re-made by the test with the same generator calls.
"""

from __future__ import annotations

import sys

import torch
from comfyui_recording import b64, comfyui_on_cpu, write_json

OUT, MODELS = sys.argv[1:3]
comfyui_on_cpu()
import comfy.model_detection  # noqa: E402
import comfy.model_sampling  # noqa: E402
import comfy.ops  # noqa: E402
import comfy.supported_models  # noqa: E402
import comfy.text_encoders.t5  # noqa: E402
import comfy.utils  # noqa: E402
from comfy import sd1_clip  # noqa: E402
from comfy.ldm.modules.diffusionmodules.mmdit import OpenAISignatureMMDITWrapper  # noqa: E402
from comfy.text_encoders.sd3_clip import SD3ClipModel  # noqa: E402

COMMIT = "a125cd84b054a57729b5eecab930ca9408719832"


def mmdit_inputs(seed: int, shape: list[int], tokens: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(x, context, y) as the test makes them: one generator, drawn in this order."""
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(shape, generator=g),
        torch.randn(shape[0], tokens, 4096, generator=g),
        torch.randn(shape[0], 80, generator=g),
    )


class Skip:
    def __call__(self, args: dict, extra: dict) -> dict:
        return {"img": args["img"], "txt": args["txt"]}


def record_mmdit(ckpt: dict) -> list[dict]:
    sd = comfy.utils.state_dict_prefix_replace(dict(ckpt), {"model.diffusion_model.": ""}, filter_keys=True)
    config = comfy.model_detection.detect_unet_config(sd, "")
    model = OpenAISignatureMMDITWrapper(**config, dtype=torch.float32, operations=comfy.ops.disable_weight_init)
    model.load_state_dict(sd, strict=True)
    cases = []
    for seed, shape, tokens, t in ((1, [2, 16, 8, 8], 154, [250.0, 800.0]), (2, [1, 16, 9, 10], 78, [999.0])):
        x, context, y = mmdit_inputs(seed, shape, tokens)
        ts = torch.tensor(t)
        with torch.no_grad():
            plain = model(x, ts, context=context, y=y)
            skipped = {}
            for block in (0, 1):
                opts = {"patches_replace": {"dit": {("double_block", block): Skip()}}}
                skipped[str(block)] = b64(model(x, ts, context=context, y=y, transformer_options=opts))
        cases.append(
            {"seed": seed, "shape": shape, "tokens": tokens, "timesteps": t, "out": b64(plain), "skip_block": skipped}
        )
    return cases


def record_denoised(ckpt: dict) -> dict:
    """ComfyUI's whole SD3 model (model_base.SD3 with supported_models.SD3's config): the denoised prediction
    apply_model returns for sigma (input scaling, sigma -> timestep, CONST output), and its latent format."""
    import comfy.model_base

    sd = comfy.utils.state_dict_prefix_replace(dict(ckpt), {"model.diffusion_model.": ""}, filter_keys=True)
    config = comfy.supported_models.SD3(comfy.model_detection.detect_unet_config(sd, ""))
    config.set_inference_dtype(torch.float32, None)
    model = comfy.model_base.SD3(config)
    model.diffusion_model.load_state_dict(sd, strict=True)
    x, context, y = mmdit_inputs(3, [1, 16, 6, 8], 154)
    sigma = torch.tensor([0.6])
    with torch.no_grad():
        denoised = model.apply_model(x, sigma, c_crossattn=context, y=y)
    return {
        "seed": 3,
        "shape": [1, 16, 6, 8],
        "tokens": 154,
        "sigma": 0.6,
        "denoised": b64(denoised),
        "process_in": b64(model.process_latent_in(x)),
        "process_out": b64(model.process_latent_out(x)),
    }


def record_controlnet(ckpt: dict) -> dict:
    """ComfyUI's SD3 ControlNet (load_controlnet_state_dict: "SD3 diffusers controlnet") on the tiny ControlNet:
    its block outputs for a seeded latent hint, the MMDiT with them as control (strength applied as ComfyUI's
    control merge does), and the latent format it scales hints with."""
    import comfy.controlnet

    cn = comfy.controlnet.load_controlnet_state_dict(
        comfy.utils.load_torch_file(f"{MODELS}/controlnet/sd3-tiny-controlnet.safetensors")
    )
    sd = comfy.utils.state_dict_prefix_replace(dict(ckpt), {"model.diffusion_model.": ""}, filter_keys=True)
    model = OpenAISignatureMMDITWrapper(
        **comfy.model_detection.detect_unet_config(sd, ""),
        dtype=torch.float32,
        operations=comfy.ops.disable_weight_init,
    )
    model.load_state_dict(sd, strict=True)
    x, context, y = mmdit_inputs(4, [2, 16, 8, 6], 154)
    hint = torch.randn([2, 16, 8, 6], generator=torch.Generator().manual_seed(5))
    ts, strength = torch.tensor([300.0, 700.0]), 0.8
    with torch.no_grad():
        outs = cn.control_model(x=x, hint=hint, timesteps=ts, context=context, y=y)["output"]
        control = {"output": [o * strength for o in outs]}
        controlled = model(x, ts, context=context, y=y, control=control)
    return {
        "seed": 4,
        "hint_seed": 5,
        "shape": [2, 16, 8, 6],
        "tokens": 154,
        "timesteps": ts.tolist(),
        "strength": strength,
        "outputs": [b64(o) for o in outs],
        "controlled": b64(controlled),
        "hint_process_in": b64(cn.latent_format.process_in(hint)),
    }


def clip_model(sd: dict, hidden_act: str, heads: int, pad: int, projected: bool) -> sd1_clip.SDClipModel:
    vocab, hidden = sd["text_model.embeddings.token_embedding.weight"].shape
    layers = len({k.split(".")[3] for k in sd if k.startswith("text_model.encoder.layers.")})
    # ComfyUI's CLIP embedding table always has OpenAI's 49408 rows: the tiny byte-level ids index its start.
    emb = sd["text_model.embeddings.token_embedding.weight"]
    sd = {**sd, "text_model.embeddings.token_embedding.weight": torch.cat([emb, emb.new_zeros(49408 - vocab, hidden)])}
    config = {
        "hidden_act": hidden_act,
        "hidden_size": hidden,
        "intermediate_size": 2 * hidden,
        "num_attention_heads": heads,
        "num_hidden_layers": layers,
        "max_position_embeddings": 77,
        "projection_dim": hidden,
        "vocab_size": vocab,
        "layer_norm_eps": 1e-5,
        "bos_token_id": vocab - 2,
        "eos_token_id": vocab - 1,
    }
    m = sd1_clip.SDClipModel(
        layer="hidden",
        layer_idx=-2,
        textmodel_json_config=config,
        dtype=torch.float32,
        special_tokens={"start": vocab - 2, "end": vocab - 1, "pad": pad},
        layer_norm_hidden_state=False,
        return_projected_pooled=projected,
    )
    missing, unexpected = m.load_sd(sd)
    assert not [k for k in missing if "position_ids" not in k], missing
    return m


def t5_model(sd: dict) -> sd1_clip.SDClipModel:
    vocab, width = sd["shared.weight"].shape
    config = {
        "d_ff": 16,
        "d_kv": 8,
        "d_model": width,
        "dense_act_fn": "gelu_pytorch_tanh",
        "is_gated_act": True,
        "layer_norm_epsilon": 1e-6,
        "model_type": "t5",
        "num_heads": 1,
        "num_layers": 1,
        "relative_attention_num_buckets": 32,
        "vocab_size": vocab,
    }
    m = sd1_clip.SDClipModel(
        layer="last",
        textmodel_json_config=config,
        dtype=torch.float32,
        special_tokens={"end": 1, "pad": 0},
        model_class=comfy.text_encoders.t5.T5,
    )
    missing, _ = m.load_sd(sd)
    assert not missing, missing
    return m


def chunk(start: int | None, ids: list[int], end: int, pad: int, length: int, weights: dict | None = None) -> list:
    row = ([start] if start is not None else []) + ids + [end]
    row += [pad] * (length - len(row))
    return [[t, (weights or {}).get(i, 1.0)] for i, t in enumerate(row)]


def token_cases() -> dict[str, dict]:
    l1 = chunk(512, [72, 101, 108, 108, 111], 513, 513, 77)
    g1 = chunk(512, [72, 101, 108, 108, 111], 513, 0, 77)
    t1 = chunk(None, [5, 17, 33, 2, 9], 1, 0, 77)
    lw = chunk(512, [72, 101, 108, 108, 111], 513, 513, 77, {2: 1.3, 3: 0.7})
    gw = chunk(512, [72, 101, 108, 108, 111], 513, 0, 77, {2: 1.3, 3: 0.7})
    tw = chunk(None, [5, 17, 33, 2, 9] * 16, 1, 0, 81, {1: 1.2, 40: 0.5})
    l2 = chunk(512, [80 + i % 60 for i in range(75)], 513, 513, 77)
    return {
        "plain": {"l": [l1], "g": [g1], "t5xxl": [t1]},
        "weighted": {"l": [lw], "g": [gw], "t5xxl": [tw]},
        "uneven": {"l": [l2, l1], "g": [g1], "t5xxl": [t1]},
        "empty_t5": {"l": [l1], "g": [g1], "t5xxl": []},
        "empty_clips": {"l": [], "g": [], "t5xxl": [t1]},
        "nothing": {"l": [], "g": [], "t5xxl": []},
    }


def cond_digest(cond: torch.Tensor) -> dict:
    """The 4096-wide states in a few KB: the CLIP features and the zero padding after them (first 96
    columns), the last 64 columns (T5's), and every token's feature sum."""
    return {"head": b64(cond[..., :96]), "tail": b64(cond[..., -64:]), "row_sums": b64(cond.double().sum(-1))}


def record_text(ckpt: dict) -> dict:
    def part(prefix: str) -> dict:
        return {k[len(prefix) :]: v for k, v in ckpt.items() if k.startswith(prefix)}

    model = SD3ClipModel.__new__(SD3ClipModel)  # its constructor builds the full-size encoders; these are tiny
    torch.nn.Module.__init__(model)
    model.clip_l = clip_model(part("text_encoders.clip_l.transformer."), "quick_gelu", 4, 513, False)
    model.clip_g = clip_model(part("text_encoders.clip_g.transformer."), "gelu", 6, 0, True)
    model.t5xxl = t5_model(part("text_encoders.t5xxl.transformer."))
    model.t5_attention_mask = False
    out = {}
    for name, tokens in token_cases().items():
        pairs = {k: [[tuple(p) for p in c] for c in v] for k, v in tokens.items()}
        with torch.no_grad():
            cond, pooled, _ = model.encode_token_weights(pairs)
        out[name] = {"tokens": tokens, "shape": list(cond.shape), "pooled": b64(pooled), **cond_digest(cond)}
    # CLIPSetLastLayer(-3) reaches all three encoders (T5, one layer deep, keeps its last layer).
    model.set_clip_options({"layer": -3})
    tokens = token_cases()["weighted"]
    with torch.no_grad():
        cond, pooled, _ = model.encode_token_weights({k: [[tuple(p) for p in c] for c in v] for k, v in tokens.items()})
    model.reset_clip_options()
    out["weighted_layer_-3"] = {
        "tokens": tokens,
        "layer": -3,
        "shape": list(cond.shape),
        "pooled": b64(pooled),
        **cond_digest(cond),
    }
    return out


def record_sampling() -> dict:
    ms = comfy.model_sampling
    cls = type("SD3Sampling", (ms.ModelSamplingDiscreteFlow, ms.CONST), {})
    sampling = cls(comfy.supported_models.SD3({}))
    sigmas = torch.tensor([1.0, 0.75, 0.5, 0.1, 0.01])
    return {
        "sigma_max": float(sampling.sigma_max),
        "sigma_min": float(sampling.sigma_min),
        "sigmas": sigmas.tolist(),
        "timesteps": sampling.timestep(sigmas).tolist(),
        "percent_to_sigma": {str(p): float(sampling.percent_to_sigma(p)) for p in (0.0, 0.01, 0.15, 0.5, 1.0)},
    }


def main() -> None:
    ckpt = comfy.utils.load_torch_file(f"{MODELS}/checkpoints/sd3-tiny.safetensors")
    fixture = {
        "comfyui_commit": COMMIT,
        "recorded_by": "scripts/record_comfyui_sd3.py",
        "mmdit": record_mmdit(ckpt),
        "denoised": record_denoised(ckpt),
        "controlnet": record_controlnet(ckpt),
        "text": record_text(ckpt),
        "sampling": record_sampling(),
    }
    write_json(OUT, fixture)


if __name__ == "__main__":
    main()
