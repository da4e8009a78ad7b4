"""Record what ComfyUI 0.3.64 (commit a125cd84) does with bf16 and fp16 text-encoder files on the CPU, with its
default flags (no --fp32-text-enc): the dtype its text-encoder policy picks (model_management.text_encoder_dtype),
the dtypes its loaded text encoder holds its weights in, the dtype the first linear layer computes in, and the
conditioning of a prompt (tests/models/fixtures/comfyui_text_encoder_dtypes.json.xz, checked by
tests/models/test_text_encoder_dtypes.py).

Run inside that ComfyUI's own environment (nothing of ComfyUI is copied here), after `comfy-cluster demo-models`:

    cd <ComfyUI 0.3.64 source> && PYTHONPATH=<torchvision shim>:/work/main/scripts:. OMP_NUM_THREADS=1 \\
        <venv>/bin/python /work/main/scripts/record_comfyui_text_encoder_dtypes.py <fixture> <workspace> <tmp dir>

The bf16 / fp16 files are the demo's tiny files cast to that dtype (the test casts them the same way). Families:
T5-XXL (flux-tiny-t5, CLIPLoader type ltxv; its tiny sizes and vocabulary given to ComfyUI's T5 as
scripts/record_comfyui_chroma.py does) and Qwen2.5-VL-7B (qwen_2.5_vl_7b_tiny, type qwen_image; its tiny sizes given
as scripts/record_comfyui_qwen_image.py does). Nothing else of ComfyUI is changed."""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from comfyui_recording import b64, comfyui_on_cpu, sha256, tiny_t5_in_comfyui, write_json

OUT, WORKSPACE, TMP = sys.argv[1:4]
comfyui_on_cpu()
import comfy.model_management  # noqa: E402
import comfy.sd  # noqa: E402
import comfy.text_encoders.llama  # noqa: E402
import comfy.text_encoders.lt  # noqa: E402
import comfy.utils  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

COMMIT = "a125cd84"
REPO = "/work/main"
VOCAB = f"{REPO}/nodes/models/configs/flux-tiny/t5_vocab.json"
HEAD = 128  # ComfyUI's Qwen2.5-VL head width
PROMPT = "a (red:1.3) fox in the snow"
FAMILIES = {
    "t5xxl": ("text_encoders/flux-tiny-t5.safetensors", comfy.sd.CLIPType.LTXV, "ltxv"),
    "qwen25_7b": ("text_encoders/qwen_2.5_vl_7b_tiny.safetensors", comfy.sd.CLIPType.QWEN_IMAGE, "qwen_image"),
}
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def cast_file(source: str, dtype: torch.dtype, target: Path) -> Path:
    """The tiny file with every float tensor cast to `dtype` (as the test makes it)."""
    sd = comfy.utils.load_torch_file(source)
    save_file({k: (v.to(dtype) if v.is_floating_point() else v).contiguous() for k, v in sd.items()}, str(target))
    return target


def qwen_tiny_sizes(path: str) -> None:
    """Give ComfyUI's Qwen2.5-VL-7B config the tiny file's sizes, and its detection the tiny width."""
    te = comfy.utils.load_torch_file(path)
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
    detect_te = comfy.sd.detect_te_model

    def detect_te_tiny(sd):
        if sd.get("model.layers.0.post_attention_layernorm.weight", torch.empty(0)).shape[0] == hidden:
            return comfy.sd.TEModel.QWEN25_7B
        return detect_te(sd)

    comfy.sd.detect_te_model = detect_te_tiny


def first_linear_input_dtype(clip) -> str:
    """The dtype the first Linear layer receives while encoding (manual_cast casts the weight to it)."""
    seen: list[torch.dtype] = []
    linear = next(m for m in clip.cond_stage_model.modules() if isinstance(m, torch.nn.Linear))
    handle = linear.register_forward_pre_hook(lambda _m, args: seen.append(args[0].dtype))
    clip.encode_from_tokens_scheduled(clip.tokenize(PROMPT))
    handle.remove()
    return str(seen[0])


def main() -> None:
    torch.set_num_threads(1)
    tiny_t5_in_comfyui(f"{WORKSPACE}/models/{FAMILIES['t5xxl'][0]}", VOCAB, comfy.text_encoders.lt)
    qwen_tiny_sizes(f"{WORKSPACE}/models/{FAMILIES['qwen25_7b'][0]}")
    out = {
        "comfyui_commit": COMMIT,
        "recorded_by": "scripts/record_comfyui_text_encoder_dtypes.py",
        "prompt": PROMPT,
        "text_encoder_dtype_cpu": str(comfy.model_management.text_encoder_dtype(torch.device("cpu"))),
        "files": {},
        "cases": [],
    }
    for family, (rel, clip_type, type_name) in FAMILIES.items():
        out["files"][rel] = sha256(f"{WORKSPACE}/models/{rel}")
        for name, dtype in DTYPES.items():
            path = cast_file(f"{WORKSPACE}/models/{rel}", dtype, Path(TMP) / f"{family}_{name}.safetensors")
            clip = comfy.sd.load_clip(ckpt_paths=[str(path)], clip_type=clip_type)
            held = sorted({str(p.dtype) for p in clip.cond_stage_model.parameters()})
            ((cond, _extra),) = clip.encode_from_tokens_scheduled(clip.tokenize(PROMPT))
            out["cases"].append(
                {
                    "family": family,
                    "file": rel,
                    "clip_type": type_name,
                    "file_dtype": name,
                    "held_dtypes": held,
                    "compute_dtype": first_linear_input_dtype(clip),
                    "cond": b64(cond),
                }
            )
            print(family, name, held, out["cases"][-1]["compute_dtype"], tuple(cond.shape))
    write_json(OUT, out)


if __name__ == "__main__":
    main()
