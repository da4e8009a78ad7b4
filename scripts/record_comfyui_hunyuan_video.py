"""Record what ComfyUI 0.3.64 computes with HunyuanVideo 1.0 on the tiny files, as the fixture
tests/models/test_hunyuan_video.py checks nodes/models/hunyuan_video*.py against
(tests/models/fixtures/comfyui_hunyuan_video.json.xz).

Run inside ComfyUI 0.3.64's own environment (it imports ComfyUI's modules; nothing of ComfyUI is copied here), after
`comfy-cluster demo-models` wrote the tiny files:

    cd <ComfyUI 0.3.64 source> && PYTHONPATH=<torchvision shim>:/work/main/scripts:. OMP_NUM_THREADS=1 \\
        <venv>/bin/python /work/main/scripts/record_comfyui_hunyuan_video.py \\
        /work/main/tests/models/fixtures/comfyui_hunyuan_video.json <workspace>

What is given to ComfyUI, as the other recorders do: the tiny sizes ComfyUI fixes for the released files (its
detection's vec_in_dim 768 -> the tiny CLIP-L's 32; Llama2Config's 4096-wide, 128-per-head Llama -> the tiny
file's sizes, 8-wide heads; CLIP-L's JSON config -> the tiny file's, 8-wide heads), --fp32-text-enc (ComfyUI's CPU
default holds a text encoder in float16; ours computes in the file's float32, as HiDream's recorder does), and its
Llama 3 tokenizer (a tokenizer.json not in this copy of ComfyUI): Llama 3's BPE from the quicktok-v1 package with its
special tokens and llava-llama3's <image> (128257) read as the shipped tokenizer reads them. Everything else is
ComfyUI's: the template, the cut of the states, the hidden layer, the pooled output, the DiT and model_base's conds.
Recorded: the detected configs; the conditioning for a few prompts; the raw network output (text to video, with
guiding_frame_index as "v2 (replace)" sets it, with a "custom" ref_latent); apply_model's prediction at sigma 0.8
for the text-to-video model and for the "v1 (concat)" model from its concat conds. Seeded inputs are drawn again
by the test.
"""

from __future__ import annotations

import sys

import torch
from comfyui_recording import b64, comfyui_on_cpu, sha256, write_json

ARGS = sys.argv[1:3]
comfyui_on_cpu(flags=("--fp32-text-enc",))
import comfy.cli_args  # noqa: E402

comfy.cli_args.args.fp32_text_enc = True
import comfy.clip_vision  # noqa: E402
import comfy.model_detection  # noqa: E402
import comfy.sd  # noqa: E402
import comfy.text_encoders.hunyuan_video  # noqa: E402
import comfy.text_encoders.llama  # noqa: E402
import comfy.utils  # noqa: E402
import comfy_extras.nodes_hunyuan as nodes_hunyuan  # noqa: E402
from comfy import sd1_clip  # noqa: E402

VERSION = "0.3.64"
T2V = "diffusion_models/hunyuan_video_t2v_tiny.safetensors"
I2V = "diffusion_models/hunyuan_video_i2v_tiny.safetensors"
LLAMA = "text_encoders/llava_llama3_tiny.safetensors"
CLIP_L = "text_encoders/hidream_tiny_clip_l.safetensors"
VAE = "vae/hunyuan_video_vae_tiny.safetensors"
VISION = "clip_vision/llava_llama3_vision_tiny.safetensors"
# TextEncodeHunyuanVideo_ImageToVideo: (prompt, image_interleave)
I2V_TEXT_CASES = {
    "interleave_1": ("a red fox running in the snow", 1),
    "interleave_2": ("a fox", 2),
    "interleave_3": ("", 3),
}
# HunyuanImageToVideo: (guidance_type, width, height, length, batch_size, start frames or None)
NODE_CASES = {
    "no_image": ("v1 (concat)", 64, 48, 9, 2, None),
    "v1_concat": ("v1 (concat)", 64, 48, 9, 1, (1, 40, 56)),
    "v2_replace": ("v2 (replace)", 64, 48, 9, 1, (1, 48, 64)),
    "custom": ("custom", 32, 32, 5, 1, (1, 32, 48)),
}
LLAMA_HEAD, CLIP_HEAD = 8, 8
THIN = 1536  # network outputs kept at a strided grid of about this many values (the fixture stays small)
PROMPTS = {
    "plain": "a red fox running in the snow",
    "weighted": "a (red:1.3) fox, (snow:0.8)",
    "empty": "",
    "long": ", ".join(f"w{i} t{i}" for i in range(60)),  # two CLIP-L windows of 248
}


def inputs(seed: int = 39) -> dict[str, torch.Tensor]:
    """What the test draws again."""
    g = torch.Generator().manual_seed(seed)
    return {
        "x": torch.randn(2, 16, 3, 8, 12, generator=g),
        "context": torch.randn(2, 7, 16, generator=g),
        "y": torch.randn(2, 32, generator=g),
        "ref": torch.randn(1, 16, 1, 8, 12, generator=g),
        "start": torch.randn(1, 16, 1, 8, 12, generator=g),
    }


class Llama3Tokenizer:
    """Llama 3's BPE (quicktok-v1) behind the interface ComfyUI's SDTokenizer calls, reading the special tokens and
    <image> as llava-llama3's tokenizer.json does; <|begin_of_text|> first, as that tokenizer adds it."""

    @classmethod
    def from_pretrained(cls, path, **kwargs):
        return cls()

    def __init__(self):
        import quicktok

        self.enc = quicktok.get_encoding("llama3")

    def __call__(self, text):
        ids = [128000]
        for i, part in enumerate(text.split("<image>")):
            if i:
                ids.append(128257)
            if part:
                ids.extend(self.enc.encode_with_special_tokens(part))
        return {"input_ids": ids}

    def get_vocab(self):
        return {}


def tiny_sizes(llama: dict, clip: dict, dit: dict) -> None:
    vocab, hidden = llama["model.embed_tokens.weight"].shape
    comfy.text_encoders.llama.Llama2Config.head_dim = LLAMA_HEAD  # a class attribute there
    llama_config = {
        "vocab_size": vocab,
        "hidden_size": hidden,
        "intermediate_size": llama["model.layers.0.mlp.gate_proj.weight"].shape[0],
        "num_hidden_layers": len({k.split(".")[2] for k in llama if k.startswith("model.layers.")}),
        "num_attention_heads": llama["model.layers.0.self_attn.q_proj.weight"].shape[0] // LLAMA_HEAD,
        "num_key_value_heads": llama["model.layers.0.self_attn.k_proj.weight"].shape[0] // LLAMA_HEAD,
    }
    clip_vocab, width = clip["text_model.embeddings.token_embedding.weight"].shape
    clip_config = {
        "hidden_act": "quick_gelu",
        "hidden_size": width,
        "intermediate_size": clip["text_model.encoder.layers.0.mlp.fc1.weight"].shape[0],
        "num_attention_heads": width // CLIP_HEAD,
        "num_hidden_layers": len({k.split(".")[3] for k in clip if k.startswith("text_model.encoder.layers.")}),
        "max_position_embeddings": clip["text_model.embeddings.position_embedding.weight"].shape[0],
        "projection_dim": width,
        "vocab_size": clip_vocab,
        "layer_norm_eps": 1e-5,
        "bos_token_id": clip_vocab - 2,
        "eos_token_id": clip_vocab - 1,
    }
    clip_init = sd1_clip.SDClipModel.__init__

    def clip_init_tiny(self, *args, textmodel_json_config=None, **kwargs):
        if kwargs.get("model_class") is comfy.text_encoders.llama.Llama2:
            textmodel_json_config = {**llama_config, **(textmodel_json_config or {})}
        elif textmodel_json_config is None:  # SDClipModel's default: CLIP-L's sd1_clip_config.json
            textmodel_json_config = dict(clip_config)
        clip_init(self, *args, textmodel_json_config=textmodel_json_config, **kwargs)

    sd1_clip.SDClipModel.__init__ = clip_init_tiny
    comfy.text_encoders.hunyuan_video.LlamaTokenizerFast = Llama3Tokenizer
    vec_in = dit["vector_in.in_layer.weight"].shape[1]
    detect = comfy.model_detection.detect_unet_config

    def detect_tiny(state_dict, key_prefix, metadata=None):
        cfg = detect(state_dict, key_prefix, metadata=metadata)
        if cfg is not None and cfg.get("image_model") == "hunyuan_video" and cfg.get("vec_in_dim") is not None:
            cfg = {**cfg, "vec_in_dim": vec_in}
        return cfg

    comfy.model_detection.detect_unet_config = detect_tiny


def text_cases(paths: list[str]) -> dict:
    clip = comfy.sd.load_clip(ckpt_paths=paths, clip_type=comfy.sd.CLIPType.HUNYUAN_VIDEO)
    out = {}
    for name, prompt in PROMPTS.items():
        tokens = clip.tokenize(prompt)
        ((cond, extra),) = clip.encode_from_tokens_scheduled(tokens)
        out[name] = {
            "prompt": prompt,
            "llama_ids": [int(t) for chunk in tokens["llama"] for t, *_ in chunk],
            "clip_ids": [[int(t) for t, *_ in chunk] for chunk in tokens["l"]],
            "cond": b64(cond),
            "pooled": b64(extra["pooled_output"]),
            "extra_keys": sorted(extra),
        }
        print("text", name, tuple(cond.shape), sorted(extra), file=sys.stderr)
    return out


def load_dit(path: str):
    sd = comfy.utils.load_torch_file(path)
    model = comfy.sd.load_diffusion_model_state_dict(sd, model_options={"dtype": torch.float32}).model
    config = {k: list(v) if isinstance(v, tuple) else v for k, v in model.model_config.unet_config.items()}
    config.pop("dtype", None)
    print(type(model).__name__, config, file=sys.stderr)
    return model, {"model_class": type(model).__name__, "unet_config": config, "sha256": sha256(path)}


def prediction(model, data: dict, sigma: float, **cond_kwargs) -> tuple[torch.Tensor, dict]:
    noise = data["x"]
    conds = model.extra_conds(
        noise=noise,
        device=torch.device("cpu"),
        pooled_output=data["y"],
        cross_attn=data["context"],
        latent_image=torch.zeros_like(noise),
        **cond_kwargs,
    )
    b = noise.shape[0]
    kwargs = {k: v.process_cond(batch_size=b, area=None, device=torch.device("cpu")).cond for k, v in conds.items()}
    return model.apply_model(noise, torch.full((b,), sigma), **kwargs), kwargs


def main() -> None:
    torch.set_num_threads(1)
    out_path, workspace = ARGS
    models = f"{workspace}/models"
    tiny_sizes(
        comfy.utils.load_torch_file(f"{models}/{LLAMA}"),
        comfy.utils.load_torch_file(f"{models}/{CLIP_L}"),
        comfy.utils.load_torch_file(f"{models}/{T2V}"),
    )
    out: dict = {"comfyui_version": VERSION, "files": {}}
    for rel in (T2V, I2V, LLAMA, CLIP_L):
        out["files"][rel] = sha256(f"{models}/{rel}")
    out["text"] = text_cases([f"{models}/{LLAMA}", f"{models}/{CLIP_L}"])
    data = inputs()
    out["input_sums"] = {k: float(v.sum()) for k, v in data.items()}
    t = torch.tensor([937.5, 250.0])
    guidance = torch.tensor([6.0, 6.0])
    model, info = load_dit(f"{models}/{T2V}")
    out["t2v"] = info
    out["shift"] = float(model.model_sampling.shift)
    out["sigmas"] = [float(model.model_sampling.sigma(torch.tensor(v))) for v in (999.0, 500.0, 1.0)]
    dit = model.diffusion_model
    with torch.no_grad():
        out["raw"] = b64(dit(data["x"], t, data["context"], data["y"], guidance=guidance), THIN)
        # token replacement runs at batch 1 only in ComfyUI (apply_mod's [B, D] rows meet [B, tokens, D]); its
        # sampler never batches the replacing cond with the negative one (their keys differ)
        one = {k: v[:1] for k, v in data.items()}
        out["raw_replace"] = b64(
            dit(one["x"], t[:1], one["context"], one["y"], guidance=guidance[:1], guiding_frame_index=torch.zeros(1)),
            THIN,
        )
        # ComfyUI's "custom" ref_latent also runs at batch 1 only (it writes into its expanded position ids)
        out["raw_ref_latent"] = b64(
            dit(one["x"], t[:1], one["context"], one["y"], guidance=guidance[:1], ref_latent=one["ref"]),
            THIN,
        )
        denoised, _ = prediction(model, data, 0.8)
        out["denoised_t2v"] = b64(denoised, THIN)
        denoised, _ = prediction(model, one, 0.8, guidance=3.5, guiding_frame_index=0)
        out["denoised_replace"] = b64(denoised, THIN)
    model, info = load_dit(f"{models}/{I2V}")
    out["i2v"] = info
    mask = torch.ones(1, 1, 3, 8, 12)
    mask[:, :, :1] = 0.0  # HunyuanImageToVideo's: the start image's latent frames kept
    with torch.no_grad():
        denoised, kwargs = prediction(model, data, 0.8, concat_latent_image=data["start"], concat_mask=mask)
        out["denoised_i2v"] = b64(denoised, THIN)
        out["concat_i2v"] = b64(kwargs["c_concat"], THIN)
        denoised, _ = prediction(model, data, 0.8)  # no image: ComfyUI joins the latent and a zero mask
        out["denoised_i2v_no_image"] = b64(denoised, THIN)
    out["image_to_video"] = record_node(models)
    out["image_to_video_text"] = record_i2v_text(models)
    out["files"][VISION] = sha256(f"{models}/{VISION}")
    out["files"][VAE] = sha256(f"{models}/{VAE}")
    write_json(out_path, out)


def tiny_llava_vision(sd: dict) -> None:
    """ComfyUI's llava CLIP vision config and its projector's 4096 outputs at the tiny file's sizes: ClipVisionModel
    builds from that config whatever config file it is given, in ComfyUI's default CLIP vision dtype (float16:
    --fp32-text-enc, which this script sets for the text encoders, is lifted while it is built)."""
    import json
    import tempfile

    import comfy.clip_model

    pre = "vision_model."
    config = {
        "hidden_act": "quick_gelu",
        "hidden_size": int(sd[f"{pre}embeddings.class_embedding"].shape[0]),
        "image_size": 56,
        "intermediate_size": int(sd[f"{pre}encoder.layers.0.mlp.fc1.weight"].shape[0]),
        "layer_norm_eps": 1e-5,
        "num_attention_heads": 16,
        "num_channels": 3,
        "num_hidden_layers": len({k.split(".")[3] for k in sd if k.startswith(f"{pre}encoder.layers.")}),
        "patch_size": int(sd[f"{pre}embeddings.patch_embedding.weight"].shape[-1]),
        "projection_dim": int(sd["visual_projection.weight"].shape[0]),
        "projector_type": "llava3",
        "model_type": "clip_vision_model",
    }
    out_dim = int(sd["multi_modal_projector.linear_1.weight"].shape[0])
    projector = comfy.clip_model.LlavaProjector.__init__

    def projector_tiny(self, in_dim, _out_dim, dtype, device, operations):
        projector(self, in_dim, out_dim, dtype, device, operations)

    comfy.clip_model.LlavaProjector.__init__ = projector_tiny
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(config, f)
    init = comfy.clip_vision.ClipVisionModel.__init__

    def init_tiny(self, _json_config):
        comfy.cli_args.args.fp32_text_enc = False
        try:
            init(self, f.name)
        finally:
            comfy.cli_args.args.fp32_text_enc = True

    comfy.clip_vision.ClipVisionModel.__init__ = init_tiny
    load = comfy.clip_vision.load_clipvision_from_sd

    def load_tiny(state_dict, prefix="", convert_keys=False):  # ComfyUI tells llava's file by 23+ layers
        if "multi_modal_projector.linear_1.bias" not in state_dict:
            return load(state_dict, prefix, convert_keys)
        model = comfy.clip_vision.ClipVisionModel("llava")
        missing, unexpected = model.load_sd(state_dict)
        assert not missing and not unexpected, (missing, unexpected)
        return model

    comfy.clip_vision.load_clipvision_from_sd = load_tiny


def record_i2v_text(models: str) -> dict:
    """CLIPVisionEncode (center crop) with llava's vision file (tiny_llava_vision's sizes, held in float16 as ours)
    and TextEncodeHunyuanVideo_ImageToVideo."""
    sd = comfy.utils.load_torch_file(f"{models}/{VISION}")
    tiny_llava_vision(sd)
    vision = comfy.clip_vision.ClipVisionModel("llava")
    missing, unexpected = vision.load_sd(sd)
    assert not missing and not unexpected, (missing, unexpected)
    image = torch.rand(1, 40, 52, 3, generator=torch.Generator().manual_seed(11))
    output = vision.encode_image(image, crop=True)
    clip = comfy.sd.load_clip(
        ckpt_paths=[f"{models}/{LLAMA}", f"{models}/{CLIP_L}"], clip_type=comfy.sd.CLIPType.HUNYUAN_VIDEO
    )
    out = {"vision_dtype": str(vision.dtype), "mm_projected": b64(output.mm_projected), "cases": {}}
    for name, (prompt, interleave) in I2V_TEXT_CASES.items():
        ((cond, extra),) = nodes_hunyuan.TextEncodeHunyuanVideo_ImageToVideo().encode(clip, output, prompt, interleave)[
            0
        ]
        out["cases"][name] = {"cond": b64(cond), "pooled": b64(extra["pooled_output"]), "extra_keys": sorted(extra)}
        print("i2v text", name, tuple(cond.shape), sorted(extra), file=sys.stderr)
    return out


def tiny_vae_sizes(sd: dict) -> None:
    """ComfyUI's conv3d AutoencoderKL at the tiny VAE file's widths and blocks."""
    ch = int(sd["encoder.conv_in.conv.weight"].shape[0])
    levels = len({k.split(".")[2] for k in sd if k.startswith("encoder.down.")})
    sizes = {
        "ch": ch,
        "ch_mult": [int(sd[f"encoder.down.{i}.block.0.conv1.conv.weight"].shape[0]) // ch for i in range(levels)],
        "num_res_blocks": len({k.split(".")[4] for k in sd if k.startswith("encoder.down.0.block.")}),
    }
    kl = comfy.sd.AutoencoderKL
    comfy.sd.AutoencoderKL = lambda ddconfig, **kw: kl(ddconfig={**ddconfig, **sizes}, **kw)


def record_node(models: str) -> dict:
    """HunyuanImageToVideo on the tiny HunyuanVideo VAE (ComfyUI's conv3d AutoencoderKL given the tiny file's sizes,
    as scripts/record_comfyui_hunyuan_video_vae.py does) for each guidance type; start frames are seeded draws."""
    sd = comfy.utils.load_torch_file(f"{models}/{VAE}")
    tiny_vae_sizes(sd)
    vae = comfy.sd.VAE(sd=sd)
    cond = [[torch.ones(1, 3, 4), {"pooled_output": torch.zeros(1, 4)}]]
    out = {}
    for name, (kind, width, height, length, batch, start) in NODE_CASES.items():
        args = {"positive": cond, "vae": vae, "width": width, "height": height, "length": length}
        args.update(batch_size=batch, guidance_type=kind)
        if start is not None:
            args["start_image"] = torch.rand(*start, 3, generator=torch.Generator().manual_seed(7))
        positive, latent = nodes_hunyuan.HunyuanImageToVideo().encode(**args)
        opts = positive[0][1]
        out[name] = {
            "latent": b64(latent["samples"]),
            "noise_mask": b64(latent["noise_mask"]) if "noise_mask" in latent else None,
            "cond": {k: b64(opts[k]) for k in ("concat_latent_image", "concat_mask", "ref_latent") if k in opts},
            "guiding_frame_index": opts.get("guiding_frame_index"),
        }
        print("node", name, {k: tuple(v.shape) for k, v in latent.items()}, sorted(opts), file=sys.stderr)
    return out


if __name__ == "__main__":
    main()
