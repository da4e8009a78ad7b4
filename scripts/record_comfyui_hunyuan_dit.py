"""Record what ComfyUI 0.3.64 makes of the tiny HunyuanDiT checkpoint (nodes/models/hunyuan_dit_demo.py:
checkpoints/hunyuan_dit_1.2_tiny.safetensors and its tiny BERT vocabulary), as the fixture
tests/models/test_hunyuan_dit.py checks nodes/models/hunyuan_dit*.py against
(tests/models/fixtures/comfyui_hunyuan_dit.json.xz).

Run inside ComfyUI 0.3.64's own environment (its modules are imported; nothing of ComfyUI is copied here), after
`comfy-cluster demo-models` wrote the tiny files:

    cd <ComfyUI 0.3.64 source> && PYTHONPATH=<torchvision shim>:/work/main/scripts:. OMP_NUM_THREADS=1 \\
        <venv>/bin/python /work/main/scripts/record_comfyui_hunyuan_dit.py \\
        /work/main/tests/models/fixtures/comfyui_hunyuan_dit.json <workspace> /work/main/workflows_json/hunyuan_dit_t2i.json

ComfyUI fixes sizes the tiny file does not have; this script gives it the file's and changes nothing else: the DiT's
text widths (its HunYuanDiT defaults 1024 / 2048; detection reads width and depth), the BERT and mT5 configs
(hydit_clip.json and mt5_config_xl.json: the tiny file's sizes), the BERT tokenizer's folder (the tiny vocabulary in
place of the one ComfyUI ships) and its SD VAE's widths (sd1-tiny-vae's, 8 GroupNorm groups). Recorded: the detected
classes and sampling, the DiT's v-prediction (denoised) for seeded inputs at two sigmas, the conditioning of
CLIPTextEncodeHunyuanDiT and CLIPTextEncode for several prompts (states, masks, mT5's states), and the picture of the
workflow (CheckpointLoaderSimple, CLIPTextEncodeHunyuanDiT / CLIPTextEncode, KSampler, VAEDecode).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

import torch
from comfyui_recording import b64, comfyui_on_cpu, sha256, write_json

ARGS = sys.argv[1:4]  # (fixture, workspace, workflow); read before comfyui_on_cpu sets ComfyUI's command line
comfyui_on_cpu()
import comfy.ldm.modules.diffusionmodules.model as ldm_vae  # noqa: E402
import comfy.sd  # noqa: E402
import comfy.supported_models  # noqa: E402
import comfy.utils  # noqa: E402
import comfy_extras.nodes_hunyuan  # noqa: E402
import folder_paths  # noqa: E402
from comfy import sd1_clip  # noqa: E402

CHECKPOINT = "checkpoints/hunyuan_dit_1.2_tiny.safetensors"
VOCAB_DIR = "configs/hydit_clip_tokenizer"
VAE_GROUPS = 8
SIGMAS = (0.9, 0.2)  # fractions of the schedule's range: the sigmas used are recorded
PROMPTS = {  # name -> (BERT text, mT5 text)
    "english": ("a red cat on the house", "a red cat on the house"),
    "chinese": ("一只红猫在房子上", "一只 红 猫"),
    "weighted": ("a (red cat:1.3) in the tree", "blue sky, (dog:0.8)"),
    "empty": ("", ""),
}


def tiny_sizes(sd: dict, workspace: str) -> None:
    bert = "text_encoders.hydit_clip.transformer.bert."
    mt5 = "text_encoders.mt5xl.transformer."
    dit = "model.diffusion_model."
    comfy.supported_models.HunyuanDiT.unet_extra_config = {
        **comfy.supported_models.HunyuanDiT.unet_extra_config,
        "text_states_dim": int(sd[dit + "mlp_t5.2.weight"].shape[0]),
        "text_states_dim_t5": int(sd[dit + "mlp_t5.0.weight"].shape[1]),
    }
    layers = lambda stem: len({k[len(stem) :].split(".")[0] for k in sd if k.startswith(stem)})  # noqa: E731
    width = int(sd[bert + "embeddings.word_embeddings.weight"].shape[1])
    bert_config = {
        "hidden_size": width,
        "intermediate_size": int(sd[bert + "encoder.layer.0.intermediate.dense.weight"].shape[0]),
        "num_attention_heads": 2,  # the tiny BERT's (nodes/models/hunyuan_dit_demo.py)
        "num_hidden_layers": layers(bert + "encoder.layer."),
        "vocab_size": int(sd[bert + "embeddings.word_embeddings.weight"].shape[0]),
    }
    bias = sd[mt5 + "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"]
    mt5_config = {
        "d_ff": int(sd[mt5 + "encoder.block.0.layer.1.DenseReluDense.wi_0.weight"].shape[0]),
        "d_kv": int(sd[mt5 + "encoder.block.0.layer.0.SelfAttention.q.weight"].shape[0]) // int(bias.shape[1]),
        "d_model": int(sd[mt5 + "shared.weight"].shape[1]),
        "num_heads": int(bias.shape[1]),
        "num_layers": layers(mt5 + "encoder.block."),
        "num_decoder_layers": layers(mt5 + "encoder.block."),
        "relative_attention_num_buckets": int(bias.shape[0]),
        "vocab_size": int(sd[mt5 + "shared.weight"].shape[0]),
    }
    here = os.path.dirname(os.path.realpath(comfy.text_encoders.hydit.__file__))
    configs = {}
    for name, tiny in (("hydit_clip.json", bert_config), ("mt5_config_xl.json", mt5_config)):
        with open(os.path.join(here, name)) as f:
            config = {**json.load(f), **tiny}
        path = os.path.join(tempfile.mkdtemp(), name)
        with open(path, "w") as f:
            json.dump(config, f)
        configs[name] = path
    clip_init = sd1_clip.SDClipModel.__init__

    def tiny_clip(self, *args, textmodel_json_config=None, **kwargs):
        name = os.path.basename(textmodel_json_config or "")
        clip_init(self, *args, textmodel_json_config=configs.get(name, textmodel_json_config), **kwargs)

    sd1_clip.SDClipModel.__init__ = tiny_clip
    tokenizer_init = sd1_clip.SDTokenizer.__init__

    def tiny_vocab(self, tokenizer_path=None, *args, **kwargs):
        if tokenizer_path is not None and str(tokenizer_path).endswith("hydit_clip_tokenizer"):
            tokenizer_path = f"{workspace}/models/{VOCAB_DIR}"
        tokenizer_init(self, tokenizer_path, *args, **kwargs)

    sd1_clip.SDTokenizer.__init__ = tiny_vocab
    vae = {k[len("vae.") :]: v for k, v in sd.items() if k.startswith("vae.")}
    sizes = {
        "ch": vae["encoder.conv_in.weight"].shape[0],
        "ch_mult": [1, 2, 4, 4],
        "num_res_blocks": len({k.split(".")[4] for k in vae if k.startswith("encoder.down.0.block.")}),
    }
    for name in ("Encoder", "Decoder"):
        cls = getattr(ldm_vae, name)
        setattr(ldm_vae, name, lambda cls=cls, **kw: cls(**{**kw, **sizes}))
    ops = ldm_vae.ops

    class TinyGroups:  # Normalize's GroupNorm with the tiny VAE's 8 groups; every other op as ComfyUI's
        def __getattr__(self, name):
            return getattr(ops, name)

        @staticmethod
        def GroupNorm(num_groups, num_channels, **kwargs):
            return ops.GroupNorm(num_groups=VAE_GROUPS, num_channels=num_channels, **kwargs)

    ldm_vae.ops = TinyGroups()


def dit_inputs(seed: int = 3) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    bert_mask = torch.zeros(2, 77)
    bert_mask[0, :9], bert_mask[1, :30] = 1, 1
    t5_mask = torch.zeros(2, 256)
    t5_mask[0, :5], t5_mask[1, :12] = 1, 1
    return {
        "x": torch.randn(2, 4, 8, 10, generator=g),
        "context": torch.randn(2, 77, 32, generator=g),
        "attention_mask": bert_mask,
        "conditioning_mt5xl": torch.randn(2, 256, 32, generator=g),
        "attention_mask_mt5xl": t5_mask,
    }


def cond_entry(cond: list) -> dict:
    tensor, extras = cond[0]
    out = {"cond": b64(tensor)}
    for key in ("attention_mask", "conditioning_mt5xl", "attention_mask_mt5xl"):
        out[key] = b64(extras[key])
    out["pooled_output"] = None if extras.get("pooled_output") is None else b64(extras["pooled_output"])
    return out


def main() -> None:
    from comfyui_recording import node_classes, run_prompt

    torch.set_num_threads(1)
    out_path, workspace, workflow = ARGS
    path = f"{workspace}/models/{CHECKPOINT}"
    sd = comfy.utils.load_torch_file(path)
    tiny_sizes(sd, workspace)
    patcher, clip, vae, _ = comfy.sd.load_checkpoint_guess_config(path, output_vae=True, output_clip=True)
    model = patcher.model
    ms = model.model_sampling
    out = {
        "comfyui": "0.3.64",
        "file_sha256": sha256(path),
        "vocab_sha256": sha256(f"{workspace}/models/{VOCAB_DIR}/vocab.txt"),
        "model_class": type(model).__name__,
        "config_class": type(model.model_config).__name__,
        "model_type": model.model_type.name,
        "sigma_min": float(ms.sigma_min),
        "sigma_max": float(ms.sigma_max),
        "denoised": {},
        "prompts": {},
    }
    data = dit_inputs()
    out["input_sums"] = {k: float(v.sum()) for k, v in data.items()}
    with torch.no_grad():
        conds = model.extra_conds(
            noise=data["x"],
            device=torch.device("cpu"),
            cross_attn=data["context"],
            attention_mask=data["attention_mask"],
            conditioning_mt5xl=data["conditioning_mt5xl"],
            attention_mask_mt5xl=data["attention_mask_mt5xl"],
        )
        kwargs = {k: v.process_cond(batch_size=2, area=None, device=torch.device("cpu")).cond for k, v in conds.items()}
        out["cond_keys"] = sorted(kwargs)
        for frac in SIGMAS:
            sigma = float(ms.sigma_min + frac * (ms.sigma_max - ms.sigma_min))
            denoised = model.apply_model(data["x"], torch.full((2,), sigma), **kwargs)
            out["denoised"][repr(sigma)] = b64(denoised)
            print(sigma, tuple(denoised.shape), float(denoised.abs().max()), file=sys.stderr)
        encode_dit = comfy_extras.nodes_hunyuan.CLIPTextEncodeHunyuanDiT()
        for name, (bert, mt5) in PROMPTS.items():
            (cond,) = encode_dit.encode(clip, bert, mt5)
            tokens = clip.tokenize(bert)
            out["prompts"][name] = {
                "bert": bert,
                "mt5xl": mt5,
                "bert_ids": [t for t, _ in tokens["hydit_clip"][0]],
                "mt5xl_ids": [t for t, _ in clip.tokenize(mt5)["mt5xl"][0]],
                "hunyuan_dit": cond_entry(cond),
            }
            out["prompts"][name]["clip_text_encode"] = cond_entry(clip.encode_from_tokens_scheduled(tokens))
    folder_paths.add_model_folder_path("checkpoints", f"{workspace}/models/checkpoints", is_default=True)
    with open(workflow) as f:
        out["workflow"] = run_prompt(json.load(f), node_classes(comfy_extras.nodes_hunyuan))
    print(out["model_class"], out["config_class"], out["model_type"], out["cond_keys"], file=sys.stderr)
    print("wrote", write_json(out_path, out), file=sys.stderr)


if __name__ == "__main__":
    main()
