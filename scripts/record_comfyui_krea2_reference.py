"""Record what today's ComfyUI computes for Krea 2 with a reference picture (the Krea 2 Turbo style-reference template:
TextEncodeQwenImageEditPlus on a CLIPLoader type krea2, FluxKontextMultiReferenceLatentMethod index_timestep_zero) on
the tiny demo files (nodes/models/krea2_demo.py), for tests/models/test_krea2_reference.py
(tests/models/fixtures/comfyui_krea2_reference.json.xz).

No runnable ComfyUI has Krea 2 (0.10.0 predates it), so, as issue 38 asks, ComfyUI's own module code is run at
development time inside upstream ComfyUI 0.10.0, saved outside this repository in a folder: comfy/ldm/krea2/model.py
of a ComfyUI master snapshot (yzkee/ComfyUI 783545f6, 2026-08-22) as `krea2_model`. Nothing of ComfyUI is committed.
0.10.0's attention module lacks two names that file imports (a tensor container and a preferred-backend object);
they are given as pass-throughs here, which changes no number. Given that folder:

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<shim>:.:<folder> OMP_NUM_THREADS=1 <venv>/bin/python \\
        /work/main/scripts/record_comfyui_krea2_reference.py <workspace with demo-models> \\
        tests/models/fixtures/comfyui_krea2_reference.json

Recorded:
- the DiT (SingleStreamDiT given the tiny sizes; its SwiGLU widths, which ComfyUI rounds up to 128, set to the
  file's) for seeded latents, stacked text states and reference latents, with ref_latents_method
  index_timestep_zero, index, and none given (references then unused), at several sizes and sigmas (FLUX
  sampling: the timestep is sigma);
- the text encoder's conditioning for TextEncodeQwenImageEditPlus's prompt with one picture ("Picture 1: " and a
  vision block before the prompt, its Qwen-Image-Edit chat template) and for the plain prompt with one picture in
  Krea2Tokenizer's own template (a vision block before the prompt): comfy/text_encoders/krea2.py's prefix strip
  (second <|im_start|>, then "user\\n") and taps (hidden state k is what ComfyUI's llama.py records before layer k
  runs, after layer k-1 and its DeepStack add; 2, 5, 8 of the tiny 9-layer model), stacked per token and flattened;
  the Qwen3-VL that ComfyUI's qwen3vl.py reimplements is run as transformers' Qwen3VLForConditionalGeneration
  (its vision tower with ComfyUI's 16 heads), the picture prepared by 0.10.0's process_qwen2vl_images with
  Qwen3-VL's settings (16-pixel patches, mean and std 0.5), as qwen3vl.py calls it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from safetensors.torch import load_file

sys.path.insert(0, str(Path(__file__).resolve().parent))

from comfyui_recording import b64, comfyui_on_cpu, sha256, write_json  # noqa: E402

WORKSPACE, OUT = sys.argv[1:3]
comfyui_on_cpu()
import comfy.ldm.modules.attention as attention  # noqa: E402
import comfy.ops  # noqa: E402
import comfy.text_encoders.qwen_vl as qwen_vl  # noqa: E402

_masked = attention.optimized_attention_masked
attention.AttentionTensorContainer = lambda t: t
attention.ComfyAttention = lambda: None
attention.optimized_attention_masked = lambda *a, preferred_attention=None, **kw: _masked(*a, **kw)
import krea2_model  # noqa: E402

MODELS = Path(WORKSPACE) / "models"
DIT_FILE = MODELS / "diffusion_models" / "krea2_turbo_tiny.safetensors"
TEXT_FILE = MODELS / "text_encoders" / "qwen3vl_4b_tiny.safetensors"
# (seed, latent h, w, reference sizes, sigma, method)
DIT_CASES = [
    (1, 6, 4, [(5, 7)], 0.7, "index_timestep_zero"),
    (2, 5, 7, [(4, 4), (3, 6)], 0.35, "index_timestep_zero"),
    (3, 4, 6, [(4, 6)], 0.9, "index"),
    (4, 4, 4, [(4, 4)], 0.5, None),
]
EDIT = (
    "<|im_start|>system\nDescribe the key features of the input image (color, shape, size, texture, objects, "
    "background), then explain how the user's text instruction should alter or modify the image. Generate a new "
    "image that meets the user's requirements while maintaining consistency with the original input where "
    "appropriate.<|im_end|>\n<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n"
)
KREA2 = (
    "<|im_start|>system\nDescribe the image by detailing the color, shape, size, texture, quantity, text, spatial "
    "relationships of the objects and background:<|im_end|>\n<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n"
)
VISION = "<|vision_start|><|image_pad|><|vision_end|>"
TAPS = [2, 5, 8, 11, 14, 17, 20, 23, 26, 29, 32, 35]  # comfy/text_encoders/krea2.py's; the tiny model has 9 layers
# (name, chat text, picture seed and size)
TEXT_CASES = [
    ("edit_plus", EDIT.format(f"Picture 1: {VISION}cute"), (6, 40, 56)),
    ("krea2_template", KREA2.format(VISION + "a yeti reading"), (7, 48, 33)),
]


def load_dit() -> torch.nn.Module:
    sd = {k: v.float() for k, v in load_file(str(DIT_FILE)).items()}
    features, patched = sd["first.weight"].shape
    head = sd["blocks.0.attn.qknorm.qnorm.scale"].shape[0]
    txt_head = sd["txtfusion.layerwise_blocks.0.attn.qknorm.qnorm.scale"].shape[0]
    model = krea2_model.SingleStreamDiT(
        features=features,
        tdim=sd["tmlp.0.weight"].shape[1],
        txtdim=sd["txtmlp.0.scale"].shape[0],
        heads=features // head,
        kvheads=sd["blocks.0.attn.wk.weight"].shape[0] // head,
        layers=len({k.split(".")[1] for k in sd if k.startswith("blocks.")}),
        patch=2,
        channels=patched // 4,
        txtlayers=sd["txtfusion.projector.weight"].shape[1],
        txtheads=sd["txtfusion.layerwise_blocks.0.attn.wq.weight"].shape[0] // txt_head,
        txtkvheads=sd["txtfusion.layerwise_blocks.0.attn.wk.weight"].shape[0] // txt_head,
        operations=comfy.ops.disable_weight_init,
    )
    for name, module in model.named_modules():  # ComfyUI rounds SwiGLU widths up to 128: the file's instead
        if isinstance(module, krea2_model.SwiGLU):
            for part in ("gate", "up", "down"):
                w = sd[f"{name}.{part}.weight"]
                setattr(module, part, comfy.ops.disable_weight_init.Linear(w.shape[1], w.shape[0], bias=False))
    model.load_state_dict(sd, strict=True)
    return model.float().eval()


def text_model():
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    sd = {k: v.float() for k, v in load_file(str(TEXT_FILE)).items()}  # ComfyUI's TEs compute in float32
    config = Qwen3VLConfig(
        text_config={
            "vocab_size": sd["model.language_model.embed_tokens.weight"].shape[0],
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 9,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "head_dim": 16,
            "rope_parameters": {"rope_type": "default", "rope_theta": 5_000_000.0, "mrope_section": [24, 20, 20]},
        },
        vision_config={
            "depth": 1,
            "hidden_size": 64,
            "intermediate_size": 32,
            "num_heads": 16,
            "out_hidden_size": 32,
            "deepstack_visual_indexes": [0],
            "num_position_embeddings": 64,
        },
    )
    model = Qwen3VLForConditionalGeneration(config)
    model.load_state_dict(sd, strict=False)  # the file has no lm_head (tied, unread)
    return model.float().eval()


def encode(model, tokenizer, chat: str, image: torch.Tensor) -> torch.Tensor:
    ids = tokenizer(chat)["input_ids"]
    template_end, count = -1, 0
    for i, t in enumerate(ids):
        if t == 151644 and count < 2:
            template_end, count = i, count + 1
    if len(ids) > template_end + 3 and ids[template_end + 1] == 872 and ids[template_end + 2] == 198:
        template_end += 3
    pixels, grid = qwen_vl.process_qwen2vl_images(image, patch_size=16, image_mean=[0.5] * 3, image_std=[0.5] * 3)
    n = int(grid.prod()) // 4
    pad = ids.index(151655)
    ids = ids[:pad] + [151655] * n + ids[pad + 1 :]
    types = torch.tensor([[int(t == 151655) for t in ids]])  # which tokens are the image's, for M-RoPE
    layers = model.model.language_model.layers
    taps = [k for k in TAPS if k < len(layers)]
    captured = {}
    hooks = [
        layers[k].register_forward_pre_hook(
            lambda m, a, kw, k=k: captured.__setitem__(k, a[0] if a else kw["hidden_states"]), with_kwargs=True
        )
        for k in taps
    ]
    with torch.no_grad():
        model.model(input_ids=torch.tensor([ids]), pixel_values=pixels, image_grid_thw=grid, mm_token_type_ids=types)
    for h in hooks:
        h.remove()
    out = torch.stack([captured[k] for k in taps], dim=1)[:, :, template_end:]  # (B, L, seq, D) as krea2.py
    b, n_layers, seq, d = out.shape
    return out.permute(0, 2, 1, 3).reshape(b, seq, n_layers * d)


def main() -> None:
    torch.set_num_threads(1)
    dit = load_dit()
    record = {"files": {"dit": sha256(str(DIT_FILE)), "text": sha256(str(TEXT_FILE))}, "dit": [], "text": []}
    width = dit.txtlayers * dit.txtdim
    with torch.no_grad():
        for seed, h, w, refs, sigma, method in DIT_CASES:
            gen = torch.Generator().manual_seed(seed)
            x = torch.randn(1, 16, h, w, generator=gen)
            context = torch.randn(1, 7, width, generator=gen)
            ref_latents = [torch.randn(1, 16, rh, rw, generator=gen) for rh, rw in refs]
            kwargs = {} if method is None else {"ref_latents_method": method}
            out = dit(x, torch.tensor([sigma]), context, ref_latents=ref_latents, **kwargs)
            record["dit"].append(
                {"seed": seed, "shape": [h, w], "refs": refs, "sigma": sigma, "method": method, "out": b64(out)}
            )
        from transformers import Qwen2Tokenizer

        tokenizer = Qwen2Tokenizer.from_pretrained("comfy/text_encoders/qwen25_tokenizer")
        model = text_model()
        for name, chat, (seed, h, w) in TEXT_CASES:
            gen = torch.Generator().manual_seed(seed)
            picture = torch.rand(1, h, w, 3, generator=gen)
            record["text"].append(
                {
                    "name": name,
                    "chat": chat,
                    "image": {"seed": seed, "shape": [h, w]},
                    "cond": b64(encode(model, tokenizer, chat, picture)),
                }
            )
    print(write_json(OUT, record))


if __name__ == "__main__":
    main()
