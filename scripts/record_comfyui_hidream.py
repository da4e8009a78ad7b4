"""Record what ComfyUI 0.3.64 (and upstream 0.10.0 for the workflows) computes on the tiny HiDream files, as the
fixture tests/models/fixtures/comfyui_hidream.json.xz.

Run inside ComfyUI's own environment (it imports ComfyUI's modules; nothing of ComfyUI is copied here), after
`comfy-cluster demo-models` (or nodes.models.hidream_demo.build_demo_hidream) wrote the tiny HiDream files:

    cd <ComfyUI 0.3.64 source> && PYTHONPATH=<site>:. OMP_NUM_THREADS=1 <ComfyUI venv>/bin/python \\
        /work/main/scripts/record_comfyui_hidream.py tests/models/fixtures/comfyui_hidream.json.xz <workspace>
    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<site>:. OMP_NUM_THREADS=1 <ComfyUI venv>/bin/python \\
        /work/main/scripts/record_comfyui_hidream.py tests/models/fixtures/comfyui_hidream.json.xz <workspace> \\
        --workflows /work/main/workflows_json/hidream_i1_dev.json /work/main/workflows_json/hidream_e1_1.json

ComfyUI fixes the released sizes (model_detection's HiDream config; the encoders' JSON configs; Llama2Config's
128-wide heads as a class attribute): this script gives its classes the tiny sizes read from the files' shapes
(the Llama's head width set on that attribute) and changes nothing else.
- dit: comfy.ldm.hidream.model.HiDreamImageTransformer2DModel loads the tiny file strictly and runs on seeded
  inputs (square, non-square odd, a batch of two timesteps, and E1's image_cond joined along the width).
- text: HiDreamTEModel.encode_token_weights with CLIP-L / CLIP-G (SDClipModel as HiDream builds them), T5-XXL
  (attention-masked) and the Llama (layer "all", masked from the first pad) on fixed token lists: plain, weighted,
  a missing T5 and Llama. The 4096-wide T5 states are stored as a digest (first 64 columns and row sums).
- workflows (recorded by upstream ComfyUI 0.10.0, whose per-step sampler noise ours follows; see main): the
  shipped workflows (the web UI's HiDream I1 Dev and E1.1 templates on the tiny files) run node by node with its
  node classes, SaveImage replaced by what it would write. For these, ComfyUI's loaders get the tiny sizes (its detection config, the encoders' JSON configs, the autoencoder's base width), tell the tiny CLIP-G
  by its width (its layers.30 key does not exist), and its Llama 3 tokenizer (a tokenizer.json not in this copy of
  ComfyUI) is Llama 3's BPE from the quicktok-v1 package, as ours; everything else is ComfyUI's.
Seeded inputs are re-made by the test with the same generator calls.
"""

from __future__ import annotations

import base64
import json
import sys

import torch

OUT, WORKSPACE = sys.argv[1:3]
WORKFLOWS = sys.argv[3:]
MODELS = f"{WORKSPACE}/models"
sys.argv[1:] = ["--cpu", "--fp32-text-enc"]  # ComfyUI reads its command line on import: no CUDA here
import comfy.cli_args  # noqa: E402

comfy.cli_args.args.cpu = True
# ComfyUI stores a text encoder's weights in float16 by default; ours compute in the file's dtype (float32 here)
comfy.cli_args.args.fp32_text_enc = True
import comfy.ldm.hidream.model  # noqa: E402
import comfy.ldm.modules.diffusionmodules.model as ldm_vae  # noqa: E402
import comfy.model_detection  # noqa: E402
import comfy.ops  # noqa: E402
import comfy.sd  # noqa: E402
import comfy.text_encoders.hidream  # noqa: E402
import comfy.text_encoders.hunyuan_video  # noqa: E402
import comfy.text_encoders.llama  # noqa: E402
import comfy.text_encoders.long_clipl  # noqa: E402
import comfy.text_encoders.t5  # noqa: E402
import comfy.utils  # noqa: E402
import folder_paths  # noqa: E402
import numpy as np  # noqa: E402
from comfy import sd1_clip  # noqa: E402
from comfyui_recording import load_json, write_json  # noqa: E402

DIT = "diffusion_models/hidream_i1_tiny.safetensors"
VAE = "vae/flux-tiny-ae.safetensors"
FILES = {
    "l": "text_encoders/hidream_tiny_clip_l.safetensors",
    "g": "text_encoders/hidream_tiny_clip_g.safetensors",
    "t5xxl": "text_encoders/hidream_tiny_t5xxl.safetensors",
    "llama": "text_encoders/llama_3.1_8b_instruct_tiny.safetensors",
}
# (seed, latent shape, T5 rows, Llama rows, sigma, E1 image_cond)
DIT_CASES = {
    "square": (1, [1, 16, 8, 8], 8, 6, 0.7, False),
    "odd": (2, [1, 16, 6, 10], 5, 9, 0.3, False),
    "batch_two": (3, [2, 16, 8, 6], 7, 4, 0.95, False),
    "e1_image_cond": (4, [1, 16, 6, 6], 6, 5, 0.5, True),
}


def b64(t: torch.Tensor) -> dict:
    t = t.detach().to(torch.float32).contiguous()
    return {"shape": list(t.shape), "f32": base64.b64encode(t.numpy().tobytes()).decode()}


def load(rel: str) -> dict:
    return comfy.utils.load_torch_file(f"{MODELS}/{rel}")


def dit_config(sd: dict) -> dict:
    """model_detection's HiDream config with the tiny file's sizes (the released ones are fixed there)."""
    inner = sd["x_embedder.proj.weight"].shape[0]
    double = len({k.split(".")[1] for k in sd if k.startswith("double_stream_blocks.")})
    single = len({k.split(".")[1] for k in sd if k.startswith("single_stream_blocks.")})
    head = inner // 2
    return {
        "image_model": "hidream",
        "attention_head_dim": head,
        "axes_dims_rope": [head // 2, head // 4, head // 4],
        "caption_channels": [
            sd[f"caption_projection.{double + single}.linear.weight"].shape[1],
            sd["caption_projection.0.linear.weight"].shape[1],
        ],
        "max_resolution": [128, 128],
        "in_channels": 16,
        "llama_layers": [min(i, 31) for i in range(double + single)],
        "num_attention_heads": 2,
        "num_routed_experts": 4,
        "num_activated_experts": 2,
        "num_layers": double,
        "num_single_layers": single,
        "out_channels": 16,
        "patch_size": 2,
        "text_emb_dim": sd["p_embedder.pooled_embedder.linear_1.weight"].shape[1],
    }


def dit_inputs(seed: int, shape: list[int], t5_rows: int, llama_rows: int, image: bool, cfg: dict) -> dict:
    g = torch.Generator().manual_seed(seed)
    states = len(set(cfg["llama_layers"]))
    x = torch.randn(shape, generator=g)
    y = torch.randn(shape[0], cfg["text_emb_dim"], generator=g)
    context = torch.randn(shape[0], t5_rows, cfg["caption_channels"][0], generator=g)
    llama = torch.randn(shape[0], states, llama_rows, cfg["caption_channels"][1], generator=g)
    cond = torch.randn(shape, generator=g) if image else None
    return {"x": x, "y": y, "context": context, "llama": llama, "image_cond": cond}


def record_dit() -> dict:
    sd = load(DIT)
    cfg = dit_config(sd)
    model = comfy.ldm.hidream.model.HiDreamImageTransformer2DModel(
        **cfg, dtype=torch.float32, device="cpu", operations=comfy.ops.disable_weight_init
    )
    missing, unexpected = model.load_state_dict(sd, strict=True)
    assert not missing and not unexpected
    out = {}
    for name, (seed, shape, t5_rows, llama_rows, sigma, image) in DIT_CASES.items():
        i = dit_inputs(seed, shape, t5_rows, llama_rows, image, cfg)
        t = torch.full((shape[0],), sigma * 1000.0)
        if name == "batch_two":
            t = torch.tensor([sigma * 1000.0, 120.0])
        with torch.no_grad():
            y = model(
                i["x"],
                t,
                y=i["y"],
                context=i["context"],
                encoder_hidden_states_llama3=i["llama"],
                image_cond=i["image_cond"],
            )
        out[name] = {
            "seed": seed,
            "shape": shape,
            "t5_rows": t5_rows,
            "llama_rows": llama_rows,
            "timesteps": t.tolist(),
            "image_cond": image,
            "out": b64(y),
        }
    return {"config": cfg, "cases": out}


DENOISED = {"i1_shift6": (5, [1, 16, 8, 6], 6.0, 0.6, False), "e1_shift1": (6, [1, 16, 6, 6], 1.0, 0.4, True)}


def record_denoised() -> dict:
    """ComfyUI's whole HiDream model (model_base.HiDream with supported_models.HiDream at the tiny sizes): the
    denoised prediction apply_model gives for sigma (input scaling, sigma * 1000 as the timestep, the negated flow
    output -> denoised), at ModelSamplingSD3's shift; E1's raw image latent through extra_conds (process_latent_in)."""
    import comfy.model_base
    import comfy.supported_models

    sd = load(DIT)
    cfg = dit_config(sd)
    config = comfy.supported_models.HiDream(cfg)
    config.set_inference_dtype(torch.float32, None)
    out = {}
    for name, (seed, shape, shift, sigma, image) in DENOISED.items():
        model = comfy.model_base.HiDream(config)
        model.diffusion_model.load_state_dict(sd, strict=True)
        model.model_sampling.set_parameters(shift=shift, multiplier=1000)  # what ModelSamplingSD3 sets
        i = dit_inputs(seed, shape, 5, 4, image, cfg)
        kw = {"c_crossattn": i["context"], "y": i["y"], "encoder_hidden_states_llama3": i["llama"]}
        if image:
            conds = model.extra_conds(concat_latent_image=i["image_cond"], noise=i["x"], pooled_output=i["y"])
            kw["image_cond"] = conds["image_cond"].process_cond(batch_size=1, area=None).cond
        with torch.no_grad():
            denoised = model.apply_model(i["x"], torch.tensor([sigma]), **kw)
        out[name] = {
            "seed": seed,
            "shape": shape,
            "shift": shift,
            "sigma": sigma,
            "image": image,
            "denoised": b64(denoised),
        }
    return out


def clip_model(sd: dict, hidden_act: str, heads: int, pad: int, layer: str, layer_idx) -> sd1_clip.SDClipModel:
    vocab, hidden = sd["text_model.embeddings.token_embedding.weight"].shape
    layers = len({k.split(".")[3] for k in sd if k.startswith("text_model.encoder.layers.")})
    emb = sd["text_model.embeddings.token_embedding.weight"]  # ComfyUI's CLIP table has 49408 rows
    sd = {**sd, "text_model.embeddings.token_embedding.weight": torch.cat([emb, emb.new_zeros(49408 - vocab, hidden)])}
    config = {
        "hidden_act": hidden_act,
        "hidden_size": hidden,
        "intermediate_size": 2 * hidden,
        "num_attention_heads": heads,
        "num_hidden_layers": layers,
        "max_position_embeddings": sd["text_model.embeddings.position_embedding.weight"].shape[0],
        "projection_dim": hidden,
        "vocab_size": vocab,
        "layer_norm_eps": 1e-5,
        "bos_token_id": vocab - 2,
        "eos_token_id": vocab - 1,
    }
    m = sd1_clip.SDClipModel(
        layer=layer,
        layer_idx=layer_idx,
        textmodel_json_config=config,
        dtype=torch.float32,
        special_tokens={"start": vocab - 2, "end": vocab - 1, "pad": pad},
        layer_norm_hidden_state=layer != "hidden",
        return_projected_pooled=True,
    )
    missing, _ = m.load_sd(sd)
    assert not [k for k in missing if "position_ids" not in k], missing
    return m


def t5_config(sd: dict) -> dict:
    vocab, width = sd["shared.weight"].shape
    return {
        "d_ff": sd["encoder.block.0.layer.1.DenseReluDense.wo.weight"].shape[1],
        "d_kv": 8,
        "d_model": width,
        "dense_act_fn": "gelu_pytorch_tanh",
        "is_gated_act": True,
        "layer_norm_epsilon": 1e-6,
        "model_type": "t5",
        "num_heads": sd["encoder.block.0.layer.0.SelfAttention.q.weight"].shape[0] // 8,
        "num_layers": len({k.split(".")[2] for k in sd if k.startswith("encoder.block.")}),
        "relative_attention_num_buckets": 32,
        "vocab_size": vocab,
    }


def t5_model(sd: dict) -> sd1_clip.SDClipModel:
    config = t5_config(sd)
    m = sd1_clip.SDClipModel(  # as T5XXLModel(attention_mask=True) for HiDream
        layer="last",
        textmodel_json_config=config,
        dtype=torch.float32,
        special_tokens={"end": 1, "pad": 0},
        model_class=comfy.text_encoders.t5.T5,
        enable_attention_masks=True,
        return_attention_masks=True,
    )
    missing, _ = m.load_sd(sd)
    assert not missing, missing
    return m


def llama_config(sd: dict) -> dict:
    vocab, hidden = sd["model.embed_tokens.weight"].shape
    q_out = sd["model.layers.0.self_attn.q_proj.weight"].shape[0]
    kv_out = sd["model.layers.0.self_attn.k_proj.weight"].shape[0]
    head = q_out // 2
    comfy.text_encoders.llama.Llama2Config.head_dim = head  # a class attribute there, not a config field
    return {
        "vocab_size": vocab,
        "hidden_size": hidden,
        "intermediate_size": sd["model.layers.0.mlp.gate_proj.weight"].shape[0],
        "num_hidden_layers": len({k.split(".")[2] for k in sd if k.startswith("model.layers.")}),
        "num_attention_heads": q_out // head,
        "num_key_value_heads": kv_out // head,
    }


def llama_model(sd: dict) -> sd1_clip.SDClipModel:
    config = llama_config(sd)
    m = sd1_clip.SDClipModel(  # as hunyuan_video.LLAMAModel(layer="all") builds it for HiDream
        layer="all",
        layer_idx=None,
        textmodel_json_config=config,
        dtype=torch.float32,
        special_tokens={"start": 128000, "pad": 128009},
        layer_norm_hidden_state=False,
        model_class=comfy.text_encoders.llama.Llama2,
        enable_attention_masks=True,
        return_attention_masks=True,
    )
    missing, _ = m.load_sd(sd)
    assert not missing, missing
    return m


def row(start, ids, end, pad, length, weights=None) -> list:
    r = ([start] if start is not None else []) + ids + ([end] if end is not None else [])
    r += [pad] * (length - len(r))
    return [[t, (weights or {}).get(i, 1.0)] for i, t in enumerate(r)]


def token_cases(vocab_l: int, positions_l: int) -> dict:
    """Token lists in ComfyUI's shapes; the long CLIP-L's windows are as long as its position table."""
    s, e = vocab_l - 2, vocab_l - 1
    ids = [72, 101, 108, 108, 111]
    l1, g1 = row(s, ids, e, e, positions_l), row(s, ids, e, 0, 77)
    t1 = row(None, [5, 17, 33, 2, 9], 1, 0, 128)
    y1 = row(128000, [64, 6685, 315, 264, 8415], None, 128009, 128)
    lw, gw = row(s, ids, e, e, positions_l, {2: 1.3}), row(s, ids, e, 0, 77, {3: 0.7})
    tw = row(None, [5, 17, 33, 2, 9], 1, 0, 128, {1: 1.2, 4: 0.5})
    yw = row(128000, [64, 6685, 315, 264, 8415] * 8, None, 128009, 128, {1: 1.3, 3: 0.6, 30: 1.1})
    return {
        "plain": {"l": [l1], "g": [g1], "t5xxl": [t1], "llama": [y1]},
        "weighted": {"l": [lw], "g": [gw], "t5xxl": [tw], "llama": [yw]},
        "clips_only": {"l": [l1], "g": [g1], "t5xxl": [t1], "llama": [y1], "drop": ["t5xxl", "llama"]},
    }


def record_text() -> dict:
    sds = {name: load(rel) for name, rel in FILES.items()}
    out = {}
    vocab_l = sds["l"]["text_model.embeddings.token_embedding.weight"].shape[0]
    positions_l = sds["l"]["text_model.embeddings.position_embedding.weight"].shape[0]
    for name, tokens in token_cases(vocab_l, positions_l).items():
        drop = tokens.get("drop", [])
        model = comfy.text_encoders.hidream.HiDreamTEModel.__new__(comfy.text_encoders.hidream.HiDreamTEModel)
        torch.nn.Module.__init__(model)  # its constructor builds the full-size encoders; these are tiny
        model.clip_l = clip_model(
            sds["l"],
            "quick_gelu",
            4,
            sds["l"]["text_model.embeddings.token_embedding.weight"].shape[0] - 1,
            "last",
            None,
        )
        model.clip_g = clip_model(sds["g"], "gelu", 6, 0, "hidden", -2)
        model.t5xxl = None if "t5xxl" in drop else t5_model(sds["t5xxl"])
        model.llama = None if "llama" in drop else llama_model(sds["llama"])
        pairs = {k: [[tuple(p) for p in c] for c in v] for k, v in tokens.items() if k != "drop"}
        with torch.no_grad():
            cond, pooled, extra = model.encode_token_weights(pairs)
        llama = extra["conditioning_llama3"]
        out[name] = {
            "tokens": tokens,
            "cond_shape": list(cond.shape),
            "cond_head": b64(cond[..., :64]),
            "cond_row_sums": b64(cond.double().sum(-1)),
            "pooled": b64(pooled),
            "llama_shape": list(llama.shape),
            "llama_zeros": not llama.any().item(),  # a missing Llama's [1, 32, 1, 4096] zeros: not stored
            "llama": b64(llama) if llama.any() else None,
        }
    return out


class Llama3Tokenizer:
    """Llama 3's BPE (quicktok-v1) behind the interface ComfyUI's SDTokenizer calls; <|begin_of_text|> first, as
    the tokenizer.json ComfyUI ships adds it."""

    @classmethod
    def from_pretrained(cls, path, **kwargs):
        return cls()

    def __init__(self):
        import quicktok

        self.enc = quicktok.get_encoding("llama3")

    def __call__(self, text):
        return {"input_ids": [128000] + list(self.enc.encode_ordinary(text))}

    def get_vocab(self):
        return {}


def clip_config(sd: dict, hidden_act: str) -> dict:
    vocab, hidden = sd["text_model.embeddings.token_embedding.weight"].shape
    return {
        "hidden_act": hidden_act,
        "hidden_size": hidden,
        "intermediate_size": 2 * hidden,
        "num_attention_heads": hidden // 8,
        "projection_dim": hidden,
        "vocab_size": vocab,
        "layer_norm_eps": 1e-5,
        "num_hidden_layers": len({k.split(".")[3] for k in sd if k.startswith("text_model.encoder.layers.")}),
        "max_position_embeddings": sd["text_model.embeddings.position_embedding.weight"].shape[0],
        "bos_token_id": 49406,
        "eos_token_id": 49407,
    }


def tiny_sizes() -> None:
    """ComfyUI's loaders at the tiny files' sizes (see the module's docstring)."""
    sds = {name: load(rel) for name, rel in FILES.items()}
    configs = {
        "sd1_clip_config.json": clip_config(sds["l"], "quick_gelu"),
        "clip_config_bigg.json": clip_config(sds["g"], "gelu"),
        "t5_config_xxl.json": t5_config(sds["t5xxl"]),
    }
    llama = llama_config(sds["llama"])
    clip_init = sd1_clip.SDClipModel.__init__

    def clip_init_tiny(self, *args, textmodel_json_config=None, **kwargs):
        if textmodel_json_config is None:  # SDClipModel's default: CLIP-L's sd1_clip_config.json
            textmodel_json_config = "sd1_clip_config.json"
        if isinstance(textmodel_json_config, str):
            name = textmodel_json_config.rsplit("/", 1)[-1]
            textmodel_json_config = dict(configs.get(name, {})) or textmodel_json_config
        elif kwargs.get("model_class") is comfy.text_encoders.llama.Llama2:
            textmodel_json_config = dict(llama)
        clip_init(self, *args, textmodel_json_config=textmodel_json_config, **kwargs)

    sd1_clip.SDClipModel.__init__ = clip_init_tiny
    comfy.text_encoders.hunyuan_video.LlamaTokenizerFast = Llama3Tokenizer
    widths = {
        sds["l"]["text_model.final_layer_norm.weight"].shape[0]: comfy.sd.TEModel.CLIP_L,
        sds["g"]["text_model.final_layer_norm.weight"].shape[0]: comfy.sd.TEModel.CLIP_G,
    }
    t5_width = sds["t5xxl"]["shared.weight"].shape[1]
    detect_te = comfy.sd.detect_te_model

    def detect_te_tiny(sd):  # ComfyUI tells CLIP-G by its 31st layer and T5-XXL by its 24th block
        if "text_model.final_layer_norm.weight" in sd:
            return widths[sd["text_model.final_layer_norm.weight"].shape[0]]
        if sd.get("encoder.final_layer_norm.weight", torch.empty(0)).shape[0] == t5_width:
            return comfy.sd.TEModel.T5_XXL
        return detect_te(sd)

    comfy.sd.detect_te_model = detect_te_tiny
    long_clip = comfy.text_encoders.long_clipl.model_options_long_clip

    def long_clip_tiny(sd, tokenizer_data, model_options):  # it names CLIP-G by the same 31st-layer key
        if detect_te_tiny(sd) == comfy.sd.TEModel.CLIP_G:
            sd = {**sd, "text_model.encoder.layers.30.mlp.fc1.weight": None}
        return long_clip(sd, tokenizer_data, model_options)

    comfy.text_encoders.long_clipl.model_options_long_clip = long_clip_tiny

    def load_sd_tiny(self, sd):  # HiDreamTEModel.load_sd routes by those same keys
        kind = detect_te_tiny(sd)
        target = {
            comfy.sd.TEModel.CLIP_L: self.clip_l,
            comfy.sd.TEModel.CLIP_G: self.clip_g,
            comfy.sd.TEModel.T5_XXL: self.t5xxl,
        }.get(kind, self.llama)
        return target.load_sd(sd)

    comfy.text_encoders.hidream.HiDreamTEModel.load_sd = load_sd_tiny
    dit = load(DIT)
    detect = comfy.model_detection.detect_unet_config

    def detect_tiny(state_dict, key_prefix, metadata=None):
        cfg = detect(state_dict, key_prefix, metadata=metadata)
        if cfg is not None and cfg.get("image_model") == "hidream":
            cfg = dit_config(dit)
        return cfg

    comfy.model_detection.detect_unet_config = detect_tiny
    ae = load(VAE)
    sizes = {
        "ch": ae["encoder.conv_in.weight"].shape[0],
        "ch_mult": [1] * len({k.split(".")[2] for k in ae if k.startswith("encoder.down.")}),
        "num_res_blocks": len({k.split(".")[4] for k in ae if k.startswith("encoder.down.0.block.")}),
    }
    for name in ("Encoder", "Decoder"):
        cls = getattr(ldm_vae, name)
        setattr(ldm_vae, name, lambda cls=cls, **kw: cls(**{**kw, **sizes}))


def run_node(cls, inputs: dict) -> tuple:
    if hasattr(cls, "FUNCTION"):
        return getattr(cls(), cls.FUNCTION)(**inputs)
    out = cls.execute(**inputs)  # a v3 node (io.ComfyNode)
    return tuple(out.result) if hasattr(out, "result") else out


def run_workflow(prompt: dict) -> dict:
    """The workflow node by node in dependency order with 0.3.64's node classes; SaveImage replaced by what it
    would write."""
    from comfy_extras import (
        nodes_cfg,
        nodes_custom_sampler,
        nodes_hidream,
        nodes_ip2p,
        nodes_model_advanced,
        nodes_post_processing,
        nodes_sd3,
    )

    import nodes

    classes = dict(nodes.NODE_CLASS_MAPPINGS)
    modules = (
        nodes_cfg,
        nodes_custom_sampler,
        nodes_hidream,
        nodes_ip2p,
        nodes_model_advanced,
        nodes_post_processing,
        nodes_sd3,
    )
    for module in modules:
        classes.update(getattr(module, "NODE_CLASS_MAPPINGS", {}))
        for cls in vars(module).values():
            if isinstance(cls, type) and cls.__module__ == module.__name__ and hasattr(cls, "define_schema"):
                classes[cls.define_schema().node_id] = cls
    results: dict[str, tuple] = {}

    def run(node_id: str) -> tuple:
        if node_id not in results:
            node = prompt[node_id]
            inputs = {k: run(v[0])[v[1]] if isinstance(v, list) else v for k, v in node["inputs"].items()}
            if node["class_type"] == "ImageScaleToTotalPixels":  # 0.10.0's new input, at its default
                inputs.setdefault("resolution_steps", 1)
            if node["class_type"] == "SaveImage":
                results[node_id] = (inputs["images"],)
            else:
                results[node_id] = run_node(classes[node["class_type"]], inputs)
        return results[node_id]

    (save,) = [k for k, v in prompt.items() if v["class_type"] == "SaveImage"]
    pngs = []
    for im in run(save)[0]:
        png = np.clip(255.0 * im.detach().cpu().numpy(), 0, 255).astype(np.uint8)
        pngs.append({"shape": list(png.shape), "u8": base64.b64encode(png.tobytes()).decode()})
    return {"prompt": prompt, "pngs_rgb": pngs}


def main() -> None:
    """0.3.64 records the networks (dit, denoised, text); the workflows are recorded by 0.10.0 into the same file
    (`--workflows` after the workspace): our samplers draw their per-step noise as ComfyUI does since 0.10.0 (its
    PR 11528: seed + 1 on the CPU), which changes KSampler lcm's images from 0.3.64's."""
    import comfyui_version

    torch.set_num_threads(1)
    version = comfyui_version.__version__
    if WORKFLOWS[:1] == ["--workflows"]:
        fixture = load_json(OUT)
        tiny_sizes()
        for folder in ("diffusion_models", "text_encoders", "vae"):
            folder_paths.add_model_folder_path(folder, f"{MODELS}/{folder}", is_default=True)
        folder_paths.set_input_directory(f"{WORKSPACE}/input")
        fixture["workflows_comfyui"] = version
        fixture["workflows"] = {}
        for path in WORKFLOWS[1:]:
            with open(path) as f:
                fixture["workflows"][path.rsplit("/", 1)[-1][: -len(".json")]] = run_workflow(json.load(f))
    else:
        fixture = {"comfyui": version, "dit": record_dit(), "denoised": record_denoised(), "text": record_text()}
    write_json(OUT, fixture)


if __name__ == "__main__":
    main()
