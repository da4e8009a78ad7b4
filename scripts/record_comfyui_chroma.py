"""Record what ComfyUI 0.3.64 (commit a125cd84) computes for Chroma on the tiny demo files, as the fixture
tests/models/fixtures/comfyui_chroma.json.

Run inside that ComfyUI's own environment (nothing of ComfyUI is copied here), after `comfy-cluster demo-models`:

    cd <ComfyUI 0.3.64 source> && PYTHONPATH=<site>:. OMP_NUM_THREADS=1 <venv>/bin/python \\
        /work/main/scripts/record_comfyui_chroma.py <fixture> <workspace> /work/main/workflows_json/chroma_text_to_image.json

ComfyUI fixes the released sizes (Chroma1's 3072-wide transformer and 5120-wide approximator, T5-XXL's config, the
autoencoder's base width); this script gives its classes the tiny sizes read from the files' shapes and the tiny
T5's own vocabulary (a unigram tokenizer of nodes/models/configs/flux-tiny/t5_vocab.json in place of T5-XXL's) and
changes nothing else (but --fp32-text-enc): the PixArt/Chroma tokenizer settings, the T5 model, model_base.Chroma and the samplers are
ComfyUI's. Recorded: the text conditioning of a few prompts with T5TokenizerOptions' settings; the DiT's raw output
on seeded inputs (odd size, batch of two, a guidance value); and the shipped workflow (the web UI's Chroma1-HD
template on the tiny files) run node by node with 0.3.64's node classes, SaveImage replaced by what it would write.
"""

from __future__ import annotations

import json
import sys

import torch
from comfyui_recording import b64, comfyui_on_cpu, node_classes, run_prompt, sha256, tiny_t5_in_comfyui

OUT, WORKSPACE, WORKFLOW = sys.argv[1:4]
comfyui_on_cpu(flags=("--fp32-text-enc",))
import comfy.cli_args

# ComfyUI stores a text encoder's weights in float16 by default (model_management.text_encoder_dtype, CPU or GPU);
# ours compute in the file's dtype, float32 for the tiny T5, so the comparison runs ComfyUI's in float32 too.
comfy.cli_args.args.fp32_text_enc = True
import comfy.ldm.modules.diffusionmodules.model as ldm_vae
import comfy.model_detection
import comfy.sd
import comfy.sd1_clip
import comfy.text_encoders.pixart_t5
import comfy.utils
import folder_paths

COMMIT = "a125cd84"
DIT = "diffusion_models/chroma_tiny.safetensors"
TEXT_ENCODER = "text_encoders/flux-tiny-t5.safetensors"
VAE = "vae/flux-tiny-ae.safetensors"
VOCAB = "/work/main/nodes/models/configs/flux-tiny/t5_vocab.json"
AXES = [4, 4, 8]  # flux-tiny's RoPE axes (its config folder; Chroma1's are 16/56/56)
PROMPTS = ["a cat on a red sofa", "a (blue:1.3) sky over (hills:0.8)", ""]
OPTIONS = [{}, {"t5xxl_min_padding": 0, "t5xxl_min_length": 0}, {"t5xxl_min_padding": 1, "t5xxl_min_length": 0}]
# (seed, latent shape, context rows, timestep(s), guidance)
CASES = {
    "one": (1, [1, 16, 8, 8], 5, [0.7], 0.0),
    "odd_size": (2, [1, 16, 7, 9], 3, [0.3], 0.0),
    "batch_two": (3, [2, 16, 6, 8], 4, [0.9, 0.2], 0.0),
    "guidance": (4, [1, 16, 8, 6], 6, [0.5], 4.0),
}


def tiny_sizes() -> None:
    tiny_t5_in_comfyui(f"{WORKSPACE}/models/{TEXT_ENCODER}", VOCAB, comfy.text_encoders.pixart_t5)

    dit = comfy.utils.load_torch_file(f"{WORKSPACE}/models/{DIT}")
    detect = comfy.model_detection.detect_unet_config

    def detect_tiny(state_dict, key_prefix, metadata=None):
        cfg = detect(state_dict, key_prefix, metadata=metadata)
        if cfg is not None and cfg.get("image_model") == "chroma":
            hidden = dit["img_in.weight"].shape[0]
            cfg["hidden_size"] = hidden
            cfg["num_heads"] = hidden // dit["double_blocks.0.img_attn.norm.key_norm.scale"].shape[0]
            cfg["context_in_dim"] = dit["txt_in.weight"].shape[1]
            cfg["axes_dim"] = AXES
            cfg["hidden_dim"] = dit["distilled_guidance_layer.in_proj.weight"].shape[0]
            cfg["out_dim"] = hidden
            cfg["n_layers"] = len({k.split(".")[2] for k in dit if k.startswith("distilled_guidance_layer.layers.")})
        return cfg

    comfy.model_detection.detect_unet_config = detect_tiny
    ae = comfy.utils.load_torch_file(f"{WORKSPACE}/models/{VAE}")
    sizes = {
        "ch": ae["encoder.conv_in.weight"].shape[0],
        "ch_mult": [1] * len({k.split(".")[2] for k in ae if k.startswith("encoder.down.")}),
        "num_res_blocks": len({k.split(".")[4] for k in ae if k.startswith("encoder.down.0.block.")}),
    }
    for name in ("Encoder", "Decoder"):
        cls = getattr(ldm_vae, name)
        setattr(ldm_vae, name, lambda cls=cls, **kw: cls(**{**kw, **sizes}))


def run_workflow(prompt: dict) -> dict:
    """The workflow node by node in dependency order with 0.3.64's node classes; SaveImage replaced by what it
    would write."""
    from comfy_extras import nodes_cond, nodes_custom_sampler, nodes_model_advanced, nodes_sd3

    classes = node_classes(nodes_cond, nodes_custom_sampler, nodes_model_advanced, nodes_sd3)
    return run_prompt(prompt, classes)


def inputs(seed: int, shape: list[int], rows: int, width: int):
    """(x, context) drawn from one generator in this order (the test draws them alike)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g), torch.randn(1, rows, width, generator=g)


def main() -> None:
    torch.set_num_threads(1)
    tiny_sizes()
    out = {
        "comfyui_commit": COMMIT,
        "recorded_by": "scripts/record_comfyui_chroma.py",
        "files": {p: sha256(f"{WORKSPACE}/models/{p}") for p in (DIT, TEXT_ENCODER, VAE)},
        "text": [],
        "cases": {},
    }
    clip = comfy.sd.load_clip(ckpt_paths=[f"{WORKSPACE}/models/{TEXT_ENCODER}"], clip_type=comfy.sd.CLIPType.CHROMA)
    for options in OPTIONS:
        c = clip.clone()
        for key, value in options.items():  # what T5TokenizerOptions does
            c.set_tokenizer_option(key, value)
        for prompt in PROMPTS:
            tokens = c.tokenize(prompt)
            ((cond, extra),) = c.encode_from_tokens_scheduled(tokens)
            out["text"].append(
                {
                    "prompt": prompt,
                    "options": options,
                    "tokens": tokens["t5xxl"],
                    "cond": b64(cond),
                    "pooled": None if extra.get("pooled_output") is None else b64(extra["pooled_output"]),
                }
            )
    model = comfy.sd.load_diffusion_model(f"{WORKSPACE}/models/{DIT}").model
    width = model.diffusion_model.txt_in.weight.shape[1]
    for name, (seed, shape, rows, t, guidance) in CASES.items():
        x, context = inputs(seed, shape, rows, width)
        with torch.no_grad():
            result = model.diffusion_model(
                x, torch.tensor(t), context.expand(shape[0], -1, -1), torch.tensor([guidance] * shape[0])
            )
        out["cases"][name] = {"out": b64(result)}
    for folder in ("diffusion_models", "text_encoders", "vae"):
        folder_paths.add_model_folder_path(folder, f"{WORKSPACE}/models/{folder}", is_default=True)
    with open(WORKFLOW) as f:
        out["workflow"] = run_workflow(json.load(f))
    with open(OUT, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
