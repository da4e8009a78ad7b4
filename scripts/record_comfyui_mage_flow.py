"""Record what today's ComfyUI computes for Mage-Flow on the tiny demo files (nodes/models/mage_flow_demo.py: the DiT
and the Mage-VAE; the text encoder is qwen-image-2.1-tiny's Qwen3-VL), for tests/models/test_mage_flow.py
(tests/models/fixtures/comfyui_mage_flow.json.xz).

No runnable ComfyUI has Mage-Flow (0.10.0 predates it), so, as issue 38 asks, ComfyUI's own module code is run at
development time inside upstream ComfyUI 0.10.0 (79cdbc81 of hiddenswitch/ComfyUI), saved outside this repository
in a folder: comfy/ldm/mage_flow/model.py of comfyanonymous/ComfyUI at dd5f2bc5 as `mage_dit_ref` (on 0.10.0's
Qwen-Image blocks, flux EmbedND and LTX TimestepEmbedding) and comfy/ldm/mage_flow/vae.py at 7ee34e9d as
`mage_vae_ref` (its MageVAE given the tiny sizes as arguments; ComfyUI fixes the released ones). Nothing of
ComfyUI is committed. Given that folder:

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<shim>:.:<folder> OMP_NUM_THREADS=1 <venv>/bin/python \\
        /work/main/scripts/record_comfyui_mage_flow.py <workspace with demo-models> \\
        tests/models/fixtures/comfyui_mage_flow.json workflows_json/mage_flow_turbo_t2i.json \\
        workflows_json/mage_flow_edit.json

Recorded, as ComfyUI's model_base.MageFlow and comfy/sd.py call them on a CPU (float32 weights from the bf16 files):
- the DiT's output for seeded latents, contexts and reference latents at several sizes (odd ones: Mage centres
  positions at -ceil(n/2)) and sigmas, the timestep rounded to bfloat16 first (process_timestep);
- the VAE's encode of seeded pixels (centre-cropped to 16s, x*2-1, the posterior mean) and decode ((x+1)/2,
  clamped), the file's keys mapped as sd.py maps them (student.dconv_encoder. -> dconv_encoder., pipeline. ->
  decoder_model., the anchor VAE dropped);
- the text encoder's conditioning for a prompt, the empty negative (" ") and an edit prompt with one picture:
  comfy/text_encoders/mage_flow.py's templates and prefix strip on the Qwen3-VL that ComfyUI's qwen3vl.py
  reimplements, run here as transformers' Qwen3VLForConditionalGeneration (its last hidden state, the final norm
  applied), the picture prepared by 0.10.0's process_qwen2vl_images with Qwen3-VL's settings (16-pixel patches,
  mean and std 0.5) as qwen3vl.py calls it (ComfyUI's qwen3vl.py needs newer ComfyUI modules than 0.10.0).
- the shipped workflows given after the fixture (workflows_json/mage_flow_turbo_t2i.json and mage_flow_edit.json,
  scripts/mage_flow_workflow.py): TextEncodeMageFlowEdit's execute as nodes_mage.py computes it (comfy.utils'
  bicubic resizes, the 384 long-edge cap, the VAE at the output size) on the encoder above, ComfyUI's KSampler
  path (ModelSamplingDiscreteFlow at shift 6 and multiplier 1, the simple schedule, comfy.sample's noise for the seed,
  noise_scaling, k-diffusion's sample_euler, cfg as uncond + (cond - uncond) * cfg, each prediction
  x - out * sigma with the model called at the bfloat16 timestep) and the VAE decode; the edit picture is the
  workspace's example.png read as LoadImage reads it and scaled by 0.10.0's ImageScaleToTotalPixels (lanczos,
  0.02 megapixels, resolution_steps 16), its size the output size (the template's switches). The text-to-image
  size is ResolutionSelector's (1:1, 0.1 megapixels, multiple 16, minimum 256: 320x320; that node is newer than
  0.10.0, its numbers are checked in its own tests). Recorded per workflow: the prompt and the image SaveImageAdvanced
  writes (8-bit).
Outputs over MAX_RECORDED_VALUES are thinned to a strided grid.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from safetensors.torch import load_file

sys.path.insert(0, str(Path(__file__).resolve().parent))

from comfyui_recording import MAX_RECORDED_VALUES, b64, comfyui_on_cpu, png_rgb, sha256, write_json  # noqa: E402

WORKSPACE, OUT, *WORKFLOWS = sys.argv[1:]
comfyui_on_cpu()
import comfy.ops  # noqa: E402
import comfy.text_encoders.qwen_vl as qwen_vl  # noqa: E402
import mage_dit_ref  # noqa: E402
import mage_vae_ref  # noqa: E402

# nodes/models/mage_flow_demo.py's files (ComfyUI's own `nodes` module shadows this repository's package here)
FILES = {"transformer": "diffusion_models/mage_flow_tiny.safetensors", "vae": "vae/mage_flow_vae_tiny.safetensors"}

MODELS = Path(WORKSPACE) / "models"
TEXT_ENCODER = MODELS / "text_encoders" / "qwen3vl_8b_tiny.safetensors"
# (seed, latent h, w, reference sizes, sigma)
DIT_CASES = [
    (1, 5, 7, [], 1.0),
    (2, 6, 4, [(5, 7)], 0.7311),
    (3, 4, 4, [(4, 4), (3, 5)], 0.25),
]
# (seed, pixel h, w): 50x70 is centre-cropped to 48x64 before encoding
VAE_CASES = [(4, 48, 80), (5, 50, 70)]
PROMPTS = ["a red fox in the snow", " "]
EDIT_PROMPT = "Remove the balloons"


def load_dit() -> torch.nn.Module:
    sd = {k: v.float() for k, v in load_file(str(MODELS / FILES["transformer"])).items()}
    model = mage_dit_ref.MageFlowTransformer2DModel(
        in_channels=128,
        out_channels=128,
        num_layers=2,
        attention_head_dim=128,
        num_attention_heads=1,
        joint_attention_dim=sd["txt_in.weight"].shape[1],
        dtype=torch.float32,
        operations=comfy.ops.disable_weight_init,
    )
    model.load_state_dict(sd, strict=True)
    return model.eval()


def load_vae() -> torch.nn.Module:
    raw = load_file(str(MODELS / FILES["vae"]))
    sd = {}
    for key, value in raw.items():  # comfy/sd.py's prefix replace and anchor drop
        if key.startswith("student.dconv_encoder."):
            sd["dconv_encoder." + key[len("student.dconv_encoder.") :]] = value.float()
        elif key.startswith("pipeline.") and not key.startswith(
            ("pipeline.y_embedder.encoder.", "pipeline.y_embedder.bottleneck.")
        ):
            sd["decoder_model." + key[len("pipeline.") :]] = value.float()
    width = sd["dconv_encoder.proj_down.weight"].shape[0]
    vae = mage_vae_ref.MageVAE(
        encoder_kwargs=dict(
            z_ch=128,
            hidden_size=width,
            num_blocks=2,
            patch_size=16,
            mlp_ratio=2.0,
            head_size=sd["dconv_encoder.patch_cond_embed.weight"].shape[0],
            num_head_blocks=2,
        ),
        decoder_kwargs=dict(
            patch_size=16,
            hidden_size=width,
            hidden_size_x=sd["decoder_model.x_embedder.embedder.0.weight"].shape[0],
            mlp_ratio=2.0,
            num_blocks=4,
            num_cond_blocks=2,
            bottleneck_dim=128,
        ),
    )
    vae.load_state_dict(sd, strict=True)
    return vae.eval()


def centre_crop(pixels: torch.Tensor, m: int = 16) -> torch.Tensor:  # comfy/sd.py's vae_encode_crop_pixels
    h, w = pixels.shape[1] // m * m, pixels.shape[2] // m * m
    oh, ow = (pixels.shape[1] % m) // 2, (pixels.shape[2] % m) // 2
    return pixels[:, oh : oh + h, ow : ow + w, :]


def text_model():
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    model = Qwen3VLForConditionalGeneration(Qwen3VLConfig(**TEXT_CONFIG))  # on the CPU: rotary buffers computed
    sd = {k: v.float() for k, v in load_file(str(TEXT_ENCODER)).items()}  # ComfyUI's TEs compute in float32
    model.load_state_dict(sd, strict=True)
    return model.float().eval()


# nodes/models/qwen_image21_demo.py's tiny Qwen3-VL (its vision tower with ComfyUI's 16 heads)
TEXT_CONFIG = {
    "text_config": {
        "vocab_size": 151_936,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 16,
        "rope_parameters": {"rope_type": "default", "rope_theta": 5_000_000.0, "mrope_section": [24, 20, 20]},
    },
    "vision_config": {
        "depth": 2,
        "hidden_size": 64,
        "intermediate_size": 48,
        "num_heads": 16,
        "out_hidden_size": 32,
        "deepstack_visual_indexes": [0],
        "num_position_embeddings": 64,
    },
}
# comfy/text_encoders/mage_flow.py's templates and its prefix strip (the token ids it tests)
T2I = (
    "<|im_start|>system\nDescribe the image by detailing the color, shape, size, texture, quantity, text, spatial "
    "relationships of the objects and background:<|im_end|>\n<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n"
)
EDIT = (
    "<|im_start|>system\nDescribe the key features of the input image (color, shape, size, texture, objects, "
    "background), then explain how the user's text instruction should alter or modify the image. Generate a new "
    "image that meets the user's requirements while maintaining consistency with the original input where "
    "appropriate.<|im_end|>\n<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n"
)
VISION = "<|vision_start|><|image_pad|><|vision_end|>"


def encode(model, tokenizer, text: str, image: torch.Tensor | None) -> torch.Tensor:
    chat = T2I.format(text) if image is None else EDIT.format(f"Image 1: {VISION}" + text)
    ids = tokenizer(chat)["input_ids"]
    template_end, count = -1, 0
    for i, t in enumerate(ids):
        if t == 151644 and count < 2:
            template_end, count = i, count + 1
    if len(ids) > template_end + 3 and ids[template_end + 1] == 872 and ids[template_end + 2] == 198:
        template_end += 3
    kwargs = {}
    if image is not None:
        pixels, grid = qwen_vl.process_qwen2vl_images(image, patch_size=16, image_mean=[0.5] * 3, image_std=[0.5] * 3)
        n = int(grid.prod()) // 4
        pad = ids.index(151655)
        ids = ids[:pad] + [151655] * n + ids[pad + 1 :]
        types = torch.tensor([[int(t == 151655) for t in ids]])  # which tokens are the image's, for M-RoPE
        kwargs = {"pixel_values": pixels, "image_grid_thw": grid, "mm_token_type_ids": types}
    with torch.no_grad():
        out = model.model(input_ids=torch.tensor([ids]), **kwargs).last_hidden_state
    return out[:, template_end:]


T2I_SIZE = (320, 320)  # ResolutionSelector("1:1 (Square)", 0.1, 16, 256)


def mage_node(model, tokenizer, vae, prompt, negative, images, width, height, batch_size=1):
    """comfy_extras/nodes_mage.py's TextEncodeMageFlowEdit.execute, its CLIP calls on the encoder above."""
    import comfy.utils

    if width == 0 or height == 0:
        ref_h, ref_w = (images[0].shape[1], images[0].shape[2]) if images else (1024, 1024)
        height, width = height or ref_h, width or ref_w
    width, height = max(16, (width // 16) * 16), max(16, (height // 16) * 16)
    refs, images_vl = [], []
    for image in images:
        samples = image.movedim(-1, 1)
        long_edge = max(samples.shape[3], samples.shape[2])
        if long_edge > 384:
            scale_by = 384 / long_edge
            size = (max(1, round(samples.shape[3] * scale_by)), max(1, round(samples.shape[2] * scale_by)))
            images_vl.append(comfy.utils.common_upscale(samples, *size, "bicubic", "disabled").movedim(1, -1))
        else:
            images_vl.append(image)
        if samples.shape[3] != width or samples.shape[2] != height:
            samples = comfy.utils.common_upscale(samples, width, height, "bicubic", "disabled")
        pixels = centre_crop(samples.movedim(1, -1)[:, :, :, :3])
        refs.append(vae.encode(pixels.movedim(-1, 1) * 2.0 - 1.0))
    assert len(images_vl) <= 1, "the recorder's encoder reads one picture"
    picture = images_vl[0] if images_vl else None
    positive = encode(model, tokenizer, prompt, picture)
    negative = encode(model, tokenizer, negative if negative else " ", picture)
    return positive, negative, refs, torch.zeros([batch_size, 128, height // 16, width // 16])


def sample(dit, positive, negative, refs, latent, seed, steps, cfg):
    """KSampler(euler, simple, denoise 1) as ComfyUI runs it on model_base.MageFlow."""
    import comfy.k_diffusion.sampling
    import comfy.model_sampling
    import comfy.sample
    import comfy.samplers

    class Sampling(comfy.model_sampling.ModelSamplingDiscreteFlow, comfy.model_sampling.CONST):
        pass

    ms = Sampling(type("Config", (), {"sampling_settings": {"shift": 6.0, "multiplier": 1.0}})())
    sigmas = comfy.samplers.calculate_sigmas(ms, "simple", steps)
    noise = comfy.sample.prepare_noise(latent, seed)
    x = ms.noise_scaling(sigmas[0], noise, latent, True)

    def predict(x, sigma, context):
        t = ms.timestep(sigma).float().to(torch.bfloat16)  # model_base: .float(), then MageFlow.process_timestep
        out = dit(ms.calculate_input(sigma, x), t, context, ref_latents=refs or None)
        return ms.calculate_denoised(sigma, out.float(), x)

    def denoiser(x, sigma, **kwargs):
        cond = predict(x, sigma, positive)
        return cond if cfg == 1.0 else (lambda u: u + (cond - u) * cfg)(predict(x, sigma, negative))

    out = comfy.k_diffusion.sampling.sample_euler(denoiser, x, sigmas, disable=True)
    return ms.inverse_noise_scaling(sigmas[-1], out)


def record_workflow(path: str, dit, vae, model, tokenizer) -> dict:
    import json

    import numpy as np
    from comfy_extras.nodes_post_processing import ImageScaleToTotalPixels
    from PIL import Image

    prompt = json.loads(Path(path).read_text())
    nodes = {node["class_type"]: node["inputs"] for node in prompt.values()}
    enc, ks = nodes["TextEncodeMageFlowEdit"], nodes["KSampler"]
    images = []
    if "LoadImage" in nodes:
        pil = Image.open(Path(WORKSPACE) / "input" / nodes["LoadImage"]["image"]).convert("RGB")
        image = torch.from_numpy(np.array(pil).astype(np.float32) / 255.0)[None]
        scale = nodes["ImageScaleToTotalPixels"]
        (image,) = ImageScaleToTotalPixels.execute(
            image, scale["upscale_method"], scale["megapixels"], scale["resolution_steps"]
        ).result
        images.append(image)
        width, height = image.shape[2], image.shape[1]  # GetImageSize through the template's switches
    else:
        width, height = T2I_SIZE
    positive, negative, refs, latent = mage_node(
        model, tokenizer, vae, enc["prompt"], enc["negative_prompt"], images, width, height, enc["batch_size"]
    )
    samples = sample(dit, positive, negative, refs, latent, ks["seed"], ks["steps"], float(ks["cfg"]))
    image = ((vae.decode(samples) + 1.0) / 2.0).clamp(0.0, 1.0).movedim(1, -1)
    return {"prompt": prompt, "pngs_rgb": [png_rgb(im, MAX_RECORDED_VALUES) for im in image]}


def main() -> None:
    torch.set_num_threads(1)
    dit, vae = load_dit(), load_vae()
    record = {
        "files": {name: sha256(str(MODELS / path)) for name, path in FILES.items()},
        "text_encoder": sha256(str(TEXT_ENCODER)),
        "dit": [],
        "vae": [],
        "text": [],
    }
    width = dit.txt_in.weight.shape[1]
    with torch.no_grad():
        for seed, h, w, refs, sigma in DIT_CASES:
            gen = torch.Generator().manual_seed(seed)
            x = torch.randn(1, 128, h, w, generator=gen)
            context = torch.randn(1, 9, width, generator=gen)
            ref_latents = [torch.randn(1, 128, rh, rw, generator=gen) for rh, rw in refs]
            t = torch.tensor([sigma], dtype=torch.float32).to(torch.bfloat16)  # model_base.MageFlow.process_timestep
            out = dit(x, t, context, ref_latents=ref_latents or None)
            record["dit"].append(
                {
                    "seed": seed,
                    "shape": [h, w],
                    "refs": refs,
                    "sigma": sigma,
                    "input_sum": float(x.sum()),
                    "out": b64(out),
                }
            )
        for seed, h, w in VAE_CASES:
            gen = torch.Generator().manual_seed(seed)
            pixels = torch.rand(1, h, w, 3, generator=gen)
            latent = vae.encode(centre_crop(pixels).movedim(-1, 1) * 2.0 - 1.0)
            image = ((vae.decode(latent) + 1.0) / 2.0).clamp(0.0, 1.0).movedim(1, -1)
            record["vae"].append(
                {
                    "seed": seed,
                    "shape": [h, w],
                    "input_sum": float(pixels.sum()),
                    "latent": b64(latent),
                    "image": b64(image, MAX_RECORDED_VALUES),
                }
            )
        from transformers import Qwen2Tokenizer

        tokenizer = Qwen2Tokenizer.from_pretrained("comfy/text_encoders/qwen25_tokenizer")
        model = text_model()
        for prompt in PROMPTS:
            record["text"].append(
                {"prompt": prompt, "image": None, "cond": b64(encode(model, tokenizer, prompt, None))}
            )
        gen = torch.Generator().manual_seed(6)
        picture = torch.rand(1, 40, 56, 3, generator=gen)
        record["text"].append(
            {
                "prompt": EDIT_PROMPT,
                "image": {"seed": 6, "shape": [40, 56]},
                "cond": b64(encode(model, tokenizer, EDIT_PROMPT, picture)),
            }
        )
        record["workflows"] = {
            Path(path).name.removesuffix(".json"): record_workflow(path, dit, vae, model, tokenizer)
            for path in WORKFLOWS
        }
    print(write_json(OUT, record))


if __name__ == "__main__":
    main()
