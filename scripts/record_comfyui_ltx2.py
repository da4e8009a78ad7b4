"""Record what upstream ComfyUI 0.10.0 computes with ltx2-tiny's audio-video transformer (nodes/models/ltx2_demo.py),
as the fixture tests/models/test_ltx2.py compares with (tests/models/fixtures/comfyui_ltx2.json.xz).

Run inside ComfyUI 0.10.0's own environment (commit 79cdbc81 of hiddenswitch/ComfyUI; it imports ComfyUI's
modules, nothing of ComfyUI is copied here; recipe in ../shared/reference/running-real-comfyui.md), after the
tiny checkpoint was written (nodes.models.ltx2_demo.build_demo_ltx2):

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim>:. OMP_NUM_THREADS=1 <venv>/bin/python \\
        /work/main/scripts/record_comfyui_ltx2.py <models dir> /work/main/tests/models/fixtures/comfyui_ltx2.json.xz \\
        [object_info.json]

The checkpoint is loaded as UNETLoader loads it (comfy.sd.load_diffusion_model: the model detected from its keys
and its metadata's transformer config) and evaluated through ComfyUI's own BaseModel (model_base.LTXAV: its
model sampling, its packing of the video and audio latents into one tensor, its per-token timesteps from a
noise mask). Recorded per case: the seeded inputs, the denoised video and audio latents of one evaluation, and
the model's detected facts. The checkpoint's video VAE is loaded as CheckpointLoaderSimple loads it
(comfy.sd.load_checkpoint_guess_config) and recorded encoding seeded frames (odd sizes: ComfyUI's centre crop to
multiples of 32) and decoding seeded latents (a batch of two). The text encoder is loaded as LTXAVTextEncoderLoader
loads it (comfy.sd.load_clip with the Gemma file and the checkpoint, CLIPType.LTXV) and recorded tokenizing and
encoding prompts. ComfyUI fixes widths of the released files that the tiny ones do not have: Gemma 3 12B's sizes
(its Gemma3_12B_Config), the projection's 3840 x 49 inputs, the connectors' 30 heads of 128 and its test for a
Gemma file (a 48th layer); so that its own classes load the tiny files, this script gives them the tiny sizes read
from the files (wrappers below) and changes nothing else. Last, ComfyUI's KSampler (comfy.sample.sample) runs two
euler steps over the zero audio-video pair with the prompt and the empty negative at LTXVConditioning's frame rate
(tests/nodes/test_ltx2_sampling.py). ComfyUI runs with PyTorch attention (--use-pytorch-cross-attention). Tensors are float32 base64; the file's sha256 is stored so the test knows it has
the same file.
"""

from __future__ import annotations

import hashlib
import json
import sys

import torch
from comfyui_recording import MAX_RECORDED_VALUES, b64, write_json

FILE = "checkpoints/ltx-2-19b-dev_tiny.safetensors"
# (name, batch, video latent [C,F,H,W] less batch, audio latent frames, text tokens, sigmas, frame rate,
#  first frames kept by the noise mask (LTXVImgToVideoInplace's), or 0)
CASES = [
    ("t2v", 1, (128, 3, 4, 6), 7, 5, [0.7], 24.0, 0),
    ("cfg_batch", 2, (128, 2, 3, 5), 5, 4, [0.35, 0.35], 25.0, 0),
    ("i2v_mask", 1, (128, 3, 4, 4), 6, 5, [0.9], 24.0, 1),
]
# VAE: frames [T,H,W] to encode, latents [B,C,F,h,w] to decode
VAE_ENCODE = [(9, 64, 96), (1, 70, 45)]
VAE_DECODE = [(1, 128, 2, 2, 3), (2, 128, 1, 2, 2)]


def sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


PROMPTS = [
    "",
    "a red fox running through fresh snow",
    "The camera slowly pans across a quiet harbour as waves lap against the wooden boats, soft jazz music.",
]
TEXT_ENCODER = "text_encoders/gemma_3_12B_it_tiny.safetensors"


def tiny_text_encoder_sizes(gemma_path: str, ckpt_path: str) -> None:
    """Give ComfyUI's LTX-2 text encoder classes the tiny files' sizes (they are constants in its code)."""
    import dataclasses

    import comfy.text_encoders.llama as llama
    import comfy.text_encoders.lt as lt
    import comfy.utils

    gemma = comfy.utils.load_torch_file(gemma_path)
    ckpt, meta = comfy.utils.load_torch_file(ckpt_path, return_metadata=True)
    head_dim = gemma["model.layers.0.self_attn.q_norm.weight"].shape[0]
    layers = len({k.split(".")[2] for k in gemma if k.startswith("model.layers.")})
    sizes = {
        "vocab_size": gemma["model.embed_tokens.weight"].shape[0],
        "hidden_size": gemma["model.embed_tokens.weight"].shape[1],
        "intermediate_size": gemma["model.layers.0.mlp.gate_proj.weight"].shape[0],
        "num_hidden_layers": layers,
        "num_attention_heads": gemma["model.layers.0.self_attn.q_proj.weight"].shape[0] // head_dim,
        "num_key_value_heads": gemma["model.layers.0.self_attn.k_proj.weight"].shape[0] // head_dim,
        "head_dim": head_dim,
        "vision_config": {
            "num_channels": 3,
            "hidden_act": "gelu_pytorch_tanh",
            "hidden_size": 8,
            "image_size": 28,
            "intermediate_size": 8,
            "model_type": "siglip_vision_model",
            "num_attention_heads": 2,
            "num_hidden_layers": 1,
            "patch_size": 14,
        },
        "mm_tokens_per_image": 4,
    }
    base = llama.Gemma3_12B_Config
    llama.Gemma3_12B_Config = dataclasses.make_dataclass(
        "TinyGemma3Config",
        [(k, type(v), dataclasses.field(default_factory=lambda v=v: v)) for k, v in sizes.items()],
        bases=(base,),
    )
    projection = ckpt["text_embedding_projection.aggregate_embed.weight"].shape
    connector = json.loads(meta["config"])["transformer"]
    original_init, original_load = lt.LTXAVTEModel.__init__, lt.LTXAVTEModel.load_sd

    def init(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        ops = self.gemma3_12b.operations
        self.text_embedding_projection = ops.Linear(projection[1], projection[0], bias=False)
        for name in ("audio_embeddings_connector", "video_embeddings_connector"):
            setattr(
                self,
                name,
                lt.Embeddings1DConnector(
                    split_rope=True,
                    double_precision_rope=True,
                    attention_head_dim=connector["connector_attention_head_dim"],
                    num_attention_heads=connector["connector_num_attention_heads"],
                    operations=ops,
                ),
            )

    def load_sd(self, sd):
        if "model.layers.0.self_attn.q_norm.weight" in sd:  # ComfyUI asks for layer 47, which a tiny Gemma lacks
            return self.gemma3_12b.load_sd(sd)
        return original_load(self, sd)

    lt.LTXAVTEModel.__init__, lt.LTXAVTEModel.load_sd = init, load_sd


# KSampler over LTXV Concat AV Latent's pair: zero video latent [1,128,2,2,2] (9 frames of 64x64), zero audio
# latent [1,8,5,16], the positive prompt and the empty negative through LTXVConditioning at 25 fps.
KSAMPLER = {"seed": 3, "steps": 2, "cfg": 2.0, "sampler": "euler", "scheduler": "simple", "frame_rate": 25.0}


def ksampler_run(clip, patcher, vae) -> dict:
    """ComfyUI's KSampler (comfy.sample.sample, as common_ksampler calls it) on the audio-video pair."""
    import comfy.nested_tensor
    import comfy.sample
    import node_helpers

    def conditioning(text: str) -> list:
        cond = clip.encode_from_tokens_scheduled(clip.tokenize(text))
        return node_helpers.conditioning_set_values(cond, {"frame_rate": KSAMPLER["frame_rate"]})

    latent = comfy.nested_tensor.NestedTensor([torch.zeros(1, 128, 2, 2, 2), torch.zeros(1, 8, 5, 16)])
    noise = comfy.sample.prepare_noise(latent, KSAMPLER["seed"])
    with torch.no_grad():
        out = comfy.sample.sample(
            patcher,
            noise,
            KSAMPLER["steps"],
            KSAMPLER["cfg"],
            KSAMPLER["sampler"],
            KSAMPLER["scheduler"],
            conditioning(PROMPTS[1]),
            conditioning(""),
            latent,
            denoise=1.0,
            seed=KSAMPLER["seed"],
        )
    video, audio = out.unbind()
    print("ksampler", tuple(video.shape), tuple(audio.shape), float(video.abs().mean()), float(audio.abs().mean()))
    record = {**KSAMPLER, "prompt": PROMPTS[1], "video": b64(video), "audio": b64(audio)}
    # Image-to-video: LTXVImgToVideoInplace (a 70x90 image, resized to the latent's 64x64, at strength 0.8) on the
    # video latent, LTXVConcatAVLatent with the audio latent (the noise mask nested), the same KSampler.
    from comfy_extras.nodes_lt import LTXVConcatAVLatent, LTXVImgToVideoInplace

    image = torch.rand((1, 70, 90, 3), generator=torch.Generator().manual_seed(9))
    (video_latent,) = LTXVImgToVideoInplace.execute(vae, image, {"samples": torch.zeros(1, 128, 2, 2, 2)}, 0.8)
    (av_latent,) = LTXVConcatAVLatent.execute(video_latent, {"samples": torch.zeros(1, 8, 5, 16)})
    noise = comfy.sample.prepare_noise(av_latent["samples"], KSAMPLER["seed"])
    with torch.no_grad():
        out = comfy.sample.sample(
            patcher,
            noise,
            KSAMPLER["steps"],
            KSAMPLER["cfg"],
            KSAMPLER["sampler"],
            KSAMPLER["scheduler"],
            conditioning(PROMPTS[1]),
            conditioning(""),
            av_latent["samples"],
            denoise=1.0,
            noise_mask=av_latent["noise_mask"],
            seed=KSAMPLER["seed"],
        )
    video, audio = out.unbind()
    print("i2v", float(video.abs().mean()), float(audio.abs().mean()))
    record["i2v"] = {"image": b64(image), "strength": 0.8, "video": b64(video), "audio": b64(audio)}
    return record


def main(models: str, out: str) -> None:
    sys.argv = [sys.argv[0], "--cpu", "--use-pytorch-cross-attention"]
    import comfy.options

    comfy.options.enable_args_parsing()
    import comfy.sd
    import comfy.utils

    torch.set_num_threads(1)
    path = f"{models}/{FILE}"
    patcher = comfy.sd.load_diffusion_model(path)
    model = patcher.model
    dm = model.diffusion_model
    record = {
        "sha256": sha256(path),
        "facts": {
            "class": type(model).__name__,
            "dtype": str(model.get_dtype()),
            "num_layers": dm.num_layers,
            "inner_dim": dm.inner_dim,
            "audio_inner_dim": dm.audio_inner_dim,
            "shift": float(model.model_sampling.shift),
            "rope_split": str(dm.split_positional_embedding),
        },
        "cases": {},
    }
    gen = torch.Generator().manual_seed(5)
    for name, batch, vshape, aframes, tokens, sigmas, rate, kept in CASES:
        video = torch.randn((batch, *vshape), generator=gen)
        audio = torch.randn((batch, 8, aframes, 16), generator=gen)
        context = torch.randn((batch, tokens, 2 * dm.caption_channels), generator=gen)
        sigma = torch.tensor(sigmas)
        packed, shapes = comfy.utils.pack_latents([video, audio])
        kwargs = {"latent_shapes": shapes, "frame_rate": rate}
        mask = None
        if kept:
            mask = torch.ones((batch, 1, *vshape[1:]))
            mask[:, :, :kept] = 0.0
            kwargs["denoise_mask"] = mask
        with torch.no_grad():
            denoised = model.apply_model(packed, sigma, c_crossattn=context, **kwargs)
        v_out, a_out = comfy.utils.unpack_latents(denoised, shapes)
        case = {
            "video": b64(video),
            "audio": b64(audio),
            "context": b64(context),
            "sigma": sigmas,
            "frame_rate": rate,
            "denoised_video": b64(v_out),
            "denoised_audio": b64(a_out),
        }
        if mask is not None:
            case["denoise_mask"] = b64(mask)
        record["cases"][name] = case
        print(name, tuple(v_out.shape), tuple(a_out.shape), float(v_out.abs().mean()), float(a_out.abs().mean()))
    _, _, vae, _ = comfy.sd.load_checkpoint_guess_config(path, output_vae=True, output_clip=False)
    record["vae"] = {"latent_channels": vae.latent_channels, "encode": [], "decode": []}
    for frames, height, width in VAE_ENCODE:
        pixels = torch.rand((frames, height, width, 3), generator=gen)
        record["vae"]["encode"].append({"pixels": b64(pixels), "latent": b64(vae.encode(pixels))})
    for shape in VAE_DECODE:
        latent = torch.randn(shape, generator=gen)
        record["vae"]["decode"].append({"latent": b64(latent), "image": b64(vae.decode(latent), MAX_RECORDED_VALUES)})
    tiny_text_encoder_sizes(f"{models}/{TEXT_ENCODER}", path)
    clip = comfy.sd.load_clip(ckpt_paths=[f"{models}/{TEXT_ENCODER}", path], clip_type=comfy.sd.CLIPType.LTXV)
    record["text_encoder_sha256"] = sha256(f"{models}/{TEXT_ENCODER}")
    record["text"] = []
    for prompt in PROMPTS:
        tokens = clip.tokenize(prompt)
        cond = clip.encode_from_tokens(tokens)
        ids = [int(t) for t, *_ in tokens["gemma3_12b"][0]]
        record["text"].append({"prompt": prompt, "ids": ids, "cond": b64(cond, MAX_RECORDED_VALUES)})
        print(repr(prompt[:20]), ids[:8], tuple(cond.shape), float(cond.abs().mean()))
    record["ksampler"] = ksampler_run(clip, patcher, vae)
    write_json(out, record)
    print(json.dumps(record["facts"]))


def object_info() -> dict:
    """/object_info of LTXAVTextEncoderLoader and LTXVImgToVideoInplace (call after main()). No torchaudio exists for torch 2.13: a
    placeholder module stands in for the audio VAE module that nodes_lt_audio imports (nothing here runs it)."""
    import importlib
    import importlib.machinery
    import types

    placeholder = types.ModuleType("torchaudio")
    placeholder.__spec__ = importlib.machinery.ModuleSpec("torchaudio", None)
    sys.modules.setdefault("torchaudio", placeholder)

    out = {}
    for module_name, name in (
        ("comfy_extras.nodes_lt_audio", "LTXAVTextEncoderLoader"),
        ("comfy_extras.nodes_lt", "LTXVImgToVideoInplace"),
    ):
        info = getattr(importlib.import_module(module_name), name).GET_NODE_INFO_V1()
        info["python_module"] = module_name
        out[name] = info
    return out


if __name__ == "__main__":
    args = sys.argv[1:]  # main() replaces sys.argv with ComfyUI's
    main(args[0], args[1])
    if len(args) > 2:  # the node's interface, as JSON
        with open(args[2], "w") as f:
            json.dump(object_info(), f, indent=1, default=str)
