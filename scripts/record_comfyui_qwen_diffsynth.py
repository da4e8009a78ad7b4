"""Record what ComfyUI 0.3.64 samples with qwen-image-tiny steered by the tiny DiffSynth ControlNets, as the fixture
QwenImageDiffsynthControlnet is tested on (tests/nodes/fixtures/comfyui_qwen_diffsynth.json.xz).

Run inside ComfyUI's own environment (it imports ComfyUI's modules; nothing of ComfyUI is copied here), after
`comfy-cluster demo-models` (or nodes.models.qwen_image_demo and nodes.models.model_patch_demo) wrote the tiny files:

    cd <ComfyUI 0.3.64 source> && PYTHONPATH=<sitecustomize shim>:. OMP_NUM_THREADS=2 <ComfyUI venv>/bin/python \\
        /work/main/scripts/record_comfyui_qwen_diffsynth.py /work/main/tests/nodes/fixtures/comfyui_qwen_diffsynth.json.xz \\
        <models dir> /work/main/workflows_json/qwen_image_controlnet_patch.json <input dir holding example.png>

ComfyUI 0.3.64 fixes the released sizes (Qwen-Image's 24 heads and 3584-wide text states, the VAE's base width 96,
the DiffSynth ControlNet's 60 blocks of width 3072); so that its classes load the tiny files, this script gives them
the tiny sizes read from the files' shapes and changes nothing else: ModelPatchLoader, QwenImageDiffsynthControlnet,
ModelSamplingAuraFlow, EmptySD3LatentImage, KSampler and VAEDecode are ComfyUI's node classes, run in that order.

Cases (CASES): no patch (the baseline the others must differ from), the canny-layout patch with a control image of another size than the latent's pixels (ComfyUI
re-encodes a scaled copy) and of the same size, a negative strength, the inpaint layout with a mask and without one,
and two patches chained. The conditioning is seeded random text states (no text encoder); the control image and mask
are seeded random tensors made by `inputs` (the test makes the same, and the fixture keeps their sums to check).
Recorded per case: the sampled latent (float32 base64) and the decoded image as SaveImage's 8-bit pixels. Also the
template's workflow on the tiny files (workflows_json/qwen_image_controlnet_patch.json, with the tiny text encoder given
its sizes the same way) run node by node with ComfyUI's node classes: its saved image's pixels."""

from __future__ import annotations

import base64
import json
import sys

import torch
from comfyui_recording import b64, comfyui_on_cpu, run_node, sha256, write_json

OUT, MODELS, WORKFLOW, INPUTS = sys.argv[1:5]
comfyui_on_cpu()
import comfy.ldm.wan.vae  # noqa: E402
import comfy.model_detection  # noqa: E402
import comfy.sd  # noqa: E402
import comfy.text_encoders.llama  # noqa: E402
import comfy.utils  # noqa: E402
import comfy_extras.nodes_model_advanced as model_advanced  # noqa: E402
import comfy_extras.nodes_model_patch as model_patch  # noqa: E402
import comfy_extras.nodes_sd3 as nodes_sd3  # noqa: E402
import folder_paths  # noqa: E402

import nodes  # noqa: E402

COMMIT = "a125cd84b054a57729b5eecab930ca9408719832"
TRANSFORMER = "qwen_image_tiny.safetensors"
TEXT_ENCODER = "qwen_2.5_vl_7b_tiny.safetensors"
VAE = "qwen_image_vae_tiny.safetensors"
CANNY = "qwen_image_diffsynth_tiny.safetensors"
INPAINT = "qwen_image_inpaint_diffsynth_tiny.safetensors"
HEAD = 128
WIDTH, HEIGHT = 128, 96
SAMPLING = {"seed": 42, "steps": 3, "cfg": 2.5, "sampler_name": "euler", "scheduler": "simple", "shift": 3.1}
# name -> (patches as (file, strength, mask?), control image (height, width))
CASES = {
    "no_patch": ([], (96, 128)),
    "canny_scaled_image": ([(CANNY, 0.8, False)], (72, 100)),
    "canny_same_size": ([(CANNY, 1.0, False)], (96, 128)),
    "canny_negative_strength": ([(CANNY, -1.5, False)], (96, 128)),
    "inpaint_mask": ([(INPAINT, 1.0, True)], (96, 128)),
    "inpaint_no_mask": ([(INPAINT, 0.7, False)], (80, 112)),
    "chained": ([(CANNY, 0.5, False), (INPAINT, 0.7, True)], (96, 128)),
}


def inputs(image_hw: tuple[int, int]) -> dict[str, torch.Tensor]:
    """The text states, the control image and the mask a case uses: one generator, drawn in this order."""
    gen = torch.Generator().manual_seed(1234)
    context = torch.randn(1, 8, 32, generator=gen)
    negative = torch.randn(1, 5, 32, generator=gen)
    image = torch.rand(1, *image_hw, 3, generator=gen)
    mask = (torch.rand(1, *image_hw, generator=gen) > 0.5).float()
    return {"context": context, "negative": negative, "image": image, "mask": mask}


def u8(image: torch.Tensor) -> dict:
    """An IMAGE as SaveImage writes its pixels."""
    a = (255.0 * image.cpu().numpy()).clip(0, 255).astype("uint8")
    return {"shape": list(a.shape), "u8": base64.b64encode(a.tobytes()).decode()}


def tiny_sizes() -> None:
    """Give ComfyUI's classes the tiny files' sizes (see the module docstring)."""
    detect = comfy.model_detection.detect_unet_config

    def detect_tiny(state_dict, key_prefix, metadata=None):
        cfg = detect(state_dict, key_prefix, metadata=metadata)
        if cfg is not None and cfg.get("image_model") == "qwen_image":
            cfg["num_attention_heads"] = state_dict[f"{key_prefix}img_in.weight"].shape[0] // HEAD
            cfg["joint_attention_dim"] = state_dict[f"{key_prefix}txt_in.weight"].shape[1]
        return cfg

    comfy.model_detection.detect_unet_config = detect_tiny
    vae_dim = comfy.utils.load_torch_file(f"{MODELS}/vae/{VAE}")["encoder.conv1.weight"].shape[0]
    wan = comfy.ldm.wan.vae.WanVAE
    comfy.ldm.wan.vae.WanVAE = lambda **cfg: wan(**{**cfg, "dim": vae_dim})
    patch = comfy.utils.load_torch_file(f"{MODELS}/model_patches/{CANNY}")
    blocks = len({k.split(".")[1] for k in patch if k.startswith("controlnet_blocks.")})
    width = patch["img_in.weight"].shape[0]
    cnet = model_patch.QwenImageBlockWiseControlNet
    model_patch.QwenImageBlockWiseControlNet = lambda **kw: cnet(**{**kw, "num_layers": blocks, "dim": width})
    for folder in ("model_patches", "diffusion_models", "text_encoders", "vae"):
        folder_paths.add_model_folder_path(folder, f"{MODELS}/{folder}", is_default=True)
    folder_paths.set_input_directory(INPUTS)
    te = comfy.utils.load_torch_file(f"{MODELS}/text_encoders/{TEXT_ENCODER}")
    vocab, hidden = te["model.embed_tokens.weight"].shape
    sizes = dict(
        vocab_size=vocab,
        hidden_size=hidden,
        num_hidden_layers=len({k.split(".")[2] for k in te if k.startswith("model.layers.")}),
        intermediate_size=te["model.layers.0.mlp.gate_proj.weight"].shape[0],
        num_attention_heads=te["model.layers.0.self_attn.q_proj.weight"].shape[0] // HEAD,
        num_key_value_heads=te["model.layers.0.self_attn.k_proj.weight"].shape[0] // HEAD,
    )
    config = comfy.text_encoders.llama.Qwen25_7BVLI_Config
    comfy.text_encoders.llama.Qwen25_7BVLI_Config = lambda **kw: config(**{**sizes, **kw})
    detect_te = comfy.sd.detect_te_model  # ComfyUI tells Qwen2.5-VL-7B by its 3584-wide layer norm

    def detect_te_tiny(sd):
        if sd.get("model.layers.0.post_attention_layernorm.weight", torch.empty(0)).shape[0] == hidden:
            return comfy.sd.TEModel.QWEN25_7B
        return detect_te(sd)

    comfy.sd.detect_te_model = detect_te_tiny


def run_case(unet, vae, patches: list, image_hw: tuple[int, int]) -> dict:
    t = inputs(image_hw)
    (model,) = model_advanced.ModelSamplingAuraFlow().patch_aura(unet, SAMPLING["shift"])
    for name, strength, masked in patches:
        (loaded,) = model_patch.ModelPatchLoader().load_model_patch(name)
        (model,) = model_patch.QwenImageDiffsynthControlnet().diffsynth_controlnet(
            model, loaded, vae, t["image"], strength, t["mask"] if masked else None
        )
    (latent,) = nodes_sd3.EmptySD3LatentImage().generate(WIDTH, HEIGHT, 1)
    (out,) = nodes.KSampler().sample(
        model,
        SAMPLING["seed"],
        SAMPLING["steps"],
        SAMPLING["cfg"],
        SAMPLING["sampler_name"],
        SAMPLING["scheduler"],
        [[t["context"], {}]],
        [[t["negative"], {}]],
        latent,
    )
    (image,) = nodes.VAEDecode().decode(vae, out)
    return {
        "patches": [list(p) for p in patches],
        "image_hw": list(image_hw),
        "input_sums": {k: float(v.double().sum()) for k, v in t.items()},
        "latent": b64(out["samples"]),
        "image_u8": u8(image),
    }


def run_workflow(prompt: dict) -> dict:
    """The workflow node by node in dependency order with ComfyUI's node classes; PreviewImage is left out and
    SaveImage replaced by what it would write."""
    import comfy_extras.nodes_canny as nodes_canny
    import comfy_extras.nodes_post_processing as post_processing

    classes = {
        **nodes.NODE_CLASS_MAPPINGS,
        "Canny": nodes_canny.Canny,
        "ImageScaleToTotalPixels": post_processing.ImageScaleToTotalPixels,
        "ModelSamplingAuraFlow": model_advanced.ModelSamplingAuraFlow,
        "ModelPatchLoader": model_patch.ModelPatchLoader,
        "QwenImageDiffsynthControlnet": model_patch.QwenImageDiffsynthControlnet,
    }
    results: dict[str, tuple] = {}

    def run(node_id: str) -> tuple:
        if node_id not in results:
            node = prompt[node_id]
            inputs = {k: run(v[0])[v[1]] if isinstance(v, list) else v for k, v in node["inputs"].items()}
            if node["class_type"] == "SaveImage":
                results[node_id] = (inputs["images"],)
            else:
                results[node_id] = run_node(classes[node["class_type"]], inputs)
        return results[node_id]

    (save,) = [k for k, v in prompt.items() if v["class_type"] == "SaveImage"]
    (image,) = run(save)[0]
    return {"prompt": prompt, "image_u8": u8(image[None])}


def main() -> None:
    tiny_sizes()
    unet = comfy.sd.load_diffusion_model(f"{MODELS}/diffusion_models/{TRANSFORMER}")
    vae = comfy.sd.VAE(sd=comfy.utils.load_torch_file(f"{MODELS}/vae/{VAE}"))
    cases = {}
    with torch.inference_mode():
        for name, (patches, image_hw) in CASES.items():
            cases[name] = run_case(unet, vae, patches, image_hw)
            print(name, "done", flush=True)
        workflow = run_workflow(json.loads(open(WORKFLOW).read()))
    files = {
        name: sha256(f"{MODELS}/{folder}/{name}")
        for folder, name in (
            ("diffusion_models", TRANSFORMER),
            ("vae", VAE),
            ("model_patches", CANNY),
            ("model_patches", INPAINT),
            ("text_encoders", TEXT_ENCODER),
        )
    }
    record = {
        "source": f"ComfyUI 0.3.64 ({COMMIT}), scripts/record_comfyui_qwen_diffsynth.py, torch {torch.__version__}",
        "files": files,
        "size": [WIDTH, HEIGHT],
        "sampling": SAMPLING,
        "cases": cases,
        "workflow": workflow,
    }
    write_json(OUT, record)


if __name__ == "__main__":
    main()
