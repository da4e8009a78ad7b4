"""Record what ComfyUI 0.3.64 (commit a125cd84) computes on the tiny Cosmos Predict2 files, as the fixture
tests/models/fixtures/comfyui_cosmos_predict2.json.xz.

Run inside that ComfyUI's own environment (nothing of ComfyUI is copied here), after `comfy-cluster demo-models`:

    cd <ComfyUI 0.3.64 source> && PYTHONPATH=<shim>:. OMP_NUM_THREADS=1 <venv>/bin/python \\
        /work/main/scripts/record_comfyui_cosmos_predict2.py <fixture> <workspace>

Both files load through ComfyUI's own comfy.sd.load_diffusion_model (its model_detection, supported_models and
model_base.CosmosPredict2, unchanged: the tiny sizes are those it builds for an unlisted width). Recorded on seeded
inputs: the MiniTrainDIT's raw output, and model.apply_model's denoised output (the rectified flow's input and
output scaling, the timestep sigma / (sigma + 1)); for the image-to-video file under a noise mask keeping the first
latent frame, as a sampler's step hands it over: c_concat 1 - mask (concat key "mask_inverted") and denoise_mask
(process_timestep's per-frame timesteps). And comfy_extras.nodes_cosmos' CosmosPredict2ImageToVideoLatent on the tiny
Wan 2.1 VAE (vae/wan_2.1_vae_tiny.safetensors through comfy.sd.VAE, its base width read from the file) with a start image, an end image, both and
neither. And the old T5-XXL text encoder (CLIPLoader type cosmos on text_encoders/oldt5_xxl_tiny.safetensors):
ComfyUI fixes its config (t5_old_config_xxl.json) and tells the file by its 24th block, so this script gives its
T5 the tiny file's sizes, its tokenizer flux-tiny's T5 vocabulary, and its detection the tiny file; tokens and
conditioning recorded for a few prompts. And the two shipped workflows (workflows_json/cosmos_predict2_2b_t2i.json and
_i2v.json, scripts/cosmos_predict2_workflow.py) run node by node with 0.3.64's node classes on the same files,
SaveImage replaced by what it would write (the input image: the demo workspace's input/example.png).
"""

from __future__ import annotations

import importlib
import json
import sys

import torch
from comfyui_recording import (
    MAX_RECORDED_VALUES,
    b64,
    comfyui_on_cpu,
    node_classes,
    run_prompt,
    sha256,
    tiny_t5_in_comfyui,
    write_json,
)

OUT, WORKSPACE = sys.argv[1:3]
comfyui_on_cpu()
# ComfyUI's own `utils` package first: an import chain below would otherwise bind comfy/utils.py as `utils`, and
# comfy_extras.nodes_images (through server) then fails to import utils.install_util
importlib.import_module("utils.install_util")
import comfy.ldm.wan.vae
import comfy.sd
import comfy.sd1_clip
import comfy.text_encoders.cosmos
import comfy.utils
import comfy_extras.nodes_cosmos
import comfy_extras.nodes_images
import comfy_extras.nodes_sd3
import folder_paths

COMMIT = "a125cd84"
T2I = "diffusion_models/cosmos_predict2_2B_t2i_tiny.safetensors"
I2V = "diffusion_models/cosmos_predict2_2B_video2world_tiny.safetensors"
VAE = "vae/wan_2.1_vae_tiny.safetensors"
TEXT_ENCODER = "text_encoders/oldt5_xxl_tiny.safetensors"
T5_VOCAB = "/work/main/nodes/models/configs/flux-tiny/t5_vocab.json"
PROMPTS = ["a red fox in the snow, photo", "a (blue:1.3) car on a (wet:0.7) road", ""]
# (seed, width, height, length, batch_size, start frames, end frames): the images are 40x56 seeded noise
NODE_CASES = {
    "start": (5, 64, 48, 13, 2, 1, 0),
    "end": (6, 48, 32, 9, 1, 0, 1),
    "start_and_end_two_frames": (7, 32, 32, 17, 1, 2, 1),
    "none": (8, 32, 48, 5, 3, 0, 0),
}
# (file, seed, latent shape, context rows, sigma, keep first frame)
CASES = {
    "t2i": (T2I, 1, [1, 16, 1, 8, 8], 7, 1.7, False),
    "t2i_batch_two": (T2I, 2, [2, 16, 1, 6, 10], 5, 0.3, False),
    "i2v": (I2V, 3, [1, 16, 3, 6, 8], 6, 4.0, True),
    "i2v_no_mask": (I2V, 4, [1, 16, 2, 4, 4], 4, 0.8, False),
}


def record(case) -> dict:
    path, seed, shape, rows, sigma, keep_first = case
    model = comfy.sd.load_diffusion_model(f"{WORKSPACE}/models/{path}").model
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=gen)
    context = torch.randn([shape[0], rows, 1024], generator=gen)
    sigmas = torch.full([shape[0]], sigma)
    kwargs = {}
    if model.image_to_video:
        mask = torch.ones([shape[0], 1, *shape[2:]])
        if keep_first:
            mask[:, :, :1] = 0.0
            kwargs["denoise_mask"] = mask
        kwargs["c_concat"] = 1.0 - mask if keep_first else torch.zeros_like(mask)
    with torch.no_grad():
        t = model.model_sampling.timestep(sigmas).float()
        # the network alone on x (and, image-to-video, the joined mask channel) at one timestep per sample
        raw_x = torch.cat([x, kwargs["c_concat"]], dim=1) if "c_concat" in kwargs else x
        raw = model.diffusion_model(raw_x, t, context=context)
        denoised = model.apply_model(x, sigmas, c_crossattn=context, **kwargs)
    # the seeded inputs (x, context, the mask) are drawn again by the test, not stored
    entry = {
        "file": path,
        "sigma": sigma,
        "raw_t": b64(t),
        "raw": b64(raw),
        "denoised": b64(denoised),
        "config": {k: v for k, v in model.model_config.unet_config.items() if isinstance(v, (int, float, str, bool))},
    }
    entry["keeps_first_frame"] = "denoise_mask" in kwargs
    return entry


def record_node(vae, case) -> dict:
    seed, width, height, length, batch_size, starts, ends = case
    gen = torch.Generator().manual_seed(seed)
    start = torch.rand([starts, 40, 56, 3], generator=gen) if starts else None
    end = torch.rand([ends, 40, 56, 3], generator=gen) if ends else None
    args = {"vae": vae, "width": width, "height": height, "length": length, "batch_size": batch_size}
    with torch.no_grad():
        (out,) = comfy_extras.nodes_cosmos.CosmosPredict2ImageToVideoLatent.execute(
            **args, start_image=start, end_image=end
        ).result
    entry = {"samples": b64(out["samples"])}
    if "noise_mask" in out:
        entry["noise_mask"] = b64(out["noise_mask"])
    return entry


def tiny_old_t5() -> None:
    """ComfyUI's old T5-XXL at the tiny file's sizes (its ungated ReLU feed-forward kept), read by flux-tiny's T5
    vocabulary, and the tiny file detected as the old T5 (ComfyUI looks for a 24th block)."""
    path = f"{WORKSPACE}/models/{TEXT_ENCODER}"
    sd = comfy.utils.load_torch_file(path)
    tiny_t5_in_comfyui(path, T5_VOCAB, comfy.text_encoders.cosmos)  # the tokenizer (the rest is replaced below)
    config = {
        "d_ff": sd["encoder.block.0.layer.1.DenseReluDense.wi.weight"].shape[0],
        "d_kv": 8,
        "d_model": sd["shared.weight"].shape[1],
        "dense_act_fn": "relu",
        "is_gated_act": False,
        "layer_norm_epsilon": 1e-6,
        "model_type": "t5",
        "num_heads": sd["encoder.block.0.layer.0.SelfAttention.q.weight"].shape[0] // 8,
        "num_layers": len({k.split(".")[2] for k in sd if k.startswith("encoder.block.")}),
        "relative_attention_num_buckets": 32,
        "vocab_size": sd["shared.weight"].shape[0],
    }
    clip_init = comfy.sd1_clip.SDClipModel.__init__

    def clip_init_tiny(self, *args, textmodel_json_config=None, **kwargs):
        if isinstance(textmodel_json_config, str) and "t5_old_config" in textmodel_json_config:
            textmodel_json_config = config
        clip_init(self, *args, textmodel_json_config=textmodel_json_config, **kwargs)

    comfy.sd1_clip.SDClipModel.__init__ = clip_init_tiny
    comfy.sd.detect_te_model = lambda sd: comfy.sd.TEModel.T5_XXL_OLD


def record_text() -> dict:
    tiny_old_t5()
    clip = comfy.sd.load_clip([f"{WORKSPACE}/models/{TEXT_ENCODER}"], clip_type=comfy.sd.CLIPType.COSMOS)
    out = {}
    for prompt in PROMPTS:
        tokens = clip.tokenize(prompt)
        cond = clip.encode_from_tokens(tokens)
        out[prompt] = {"ids": [t for t, _ in tokens["t5xxl"][0]], "cond": b64(cond, MAX_RECORDED_VALUES)}
    return out


def record_workflows() -> dict:
    for folder in ("diffusion_models", "text_encoders", "vae"):
        folder_paths.add_model_folder_path(folder, f"{WORKSPACE}/models/{folder}")
    folder_paths.set_input_directory(f"{WORKSPACE}/input")
    classes = node_classes(comfy_extras.nodes_cosmos, comfy_extras.nodes_images, comfy_extras.nodes_sd3)
    out = {}
    for name in ("cosmos_predict2_2b_t2i", "cosmos_predict2_2b_i2v"):
        with open(f"/work/main/workflows_json/{name}.json") as f:
            prompt = json.load(f)
        with torch.no_grad():
            out[name] = run_prompt(prompt, classes, max_values=MAX_RECORDED_VALUES)
    return out


def main() -> None:
    torch.set_num_threads(1)
    data = {
        "comfyui_commit": COMMIT,
        "sha256": {name: sha256(f"{WORKSPACE}/models/{name}") for name in (T2I, I2V, VAE)},
        "cases": {name: record(case) for name, case in CASES.items()},
    }
    vae_sd = comfy.utils.load_torch_file(f"{WORKSPACE}/models/{VAE}")
    wan = comfy.ldm.wan.vae.WanVAE  # ComfyUI fixes the Wan VAE's base width (96); the tiny file's is narrower
    comfy.ldm.wan.vae.WanVAE = lambda **cfg: wan(**{**cfg, "dim": vae_sd["encoder.conv1.weight"].shape[0]})
    vae = comfy.sd.VAE(sd=vae_sd)
    data["node"] = {name: record_node(vae, case) for name, case in NODE_CASES.items()}
    data["sha256"][TEXT_ENCODER] = sha256(f"{WORKSPACE}/models/{TEXT_ENCODER}")
    data["text"] = record_text()
    data["workflows"] = record_workflows()  # after record_text: the tiny T5 and Wan VAE patches are in place
    print(write_json(OUT, data))


if __name__ == "__main__":
    main()
