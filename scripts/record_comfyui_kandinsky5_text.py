"""Record what upstream ComfyUI 0.10.0 (commit 79cdbc81 of hiddenswitch/ComfyUI) makes of prompts with Kandinsky 5's
text encoders on the tiny files (DualCLIPLoader types kandinsky5 and kandinsky5_image: Qwen2.5-VL 7B + CLIP-L), as the
fixture tests/models/test_kandinsky5_text.py checks nodes/models/kandinsky5_text.py against
(tests/models/fixtures/comfyui_kandinsky5_text.json.xz).

Run inside that ComfyUI's own environment (it imports ComfyUI's modules; nothing of ComfyUI is copied here), after
`comfy-cluster demo-models` wrote the tiny files:

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim>:/work/main/scripts:. OMP_NUM_THREADS=1 \\
        <venv>/bin/python /work/main/scripts/record_comfyui_kandinsky5_text.py \\
        /work/main/tests/models/fixtures/comfyui_kandinsky5_text.json <workspace>

The tiny files: qwen_2.5_vl_7b_tiny (ComfyUI's Qwen2.5-VL 7B config given its sizes, as
scripts/record_comfyui_text_encoder_dtypes.py does) and hidream_tiny_clip_l (OpenAI's vocabulary, so ComfyUI's own
CLIP tokenizer reads it; its CLIP-L config given the tiny sizes, 8-wide heads). ComfyUI's default flags: it holds the
whole encoder, CLIP-L too, in the Qwen file's dtype (bfloat16 here: comfy/sd.py's llama_detect) and computes in
float32; the dtypes held are recorded. Nothing else of ComfyUI is changed: tokenizers, templates, the kept states'
start, the hidden layer, the pooled output are its own.
"""

from __future__ import annotations

import sys

import torch
from comfyui_recording import b64, comfyui_on_cpu, sha256, write_json

ARGS = sys.argv[1:3]  # (fixture, workspace); read before comfyui_on_cpu sets ComfyUI's command line
comfyui_on_cpu()
import comfy.sd  # noqa: E402
import comfy.text_encoders.llama  # noqa: E402
import comfy.utils  # noqa: E402
from comfy import sd1_clip  # noqa: E402

COMMIT = "79cdbc81"
QWEN = "text_encoders/qwen_2.5_vl_7b_tiny.safetensors"
CLIP_L = "text_encoders/hidream_tiny_clip_l.safetensors"
HEAD = 128  # ComfyUI's Qwen2.5-VL head width
CLIP_HEAD = 8  # the tiny CLIP's heads (nodes.models.flux_text._default_heads for a 32-wide CLIP)
PROMPTS = {
    "plain": "a red fox in the snow",
    "weighted": "a (red:1.3) fox, (snow:0.8)",
    "empty": "",
    "long": ", ".join(f"word{i} thing{i}" for i in range(40)),  # two CLIP windows
    "chat": "<|im_start|>user\nraw chat text<|im_end|>",
    "pad_token": "a fox<|endoftext|> in the snow",  # masked from attention from the pad token on
}
TYPES = {"kandinsky5": comfy.sd.CLIPType.KANDINSKY5, "kandinsky5_image": comfy.sd.CLIPType.KANDINSKY5_IMAGE}


def tiny_sizes(qwen: dict, clip: dict) -> None:
    """ComfyUI's Qwen2.5-VL 7B and CLIP-L configs at the tiny files' sizes."""
    vocab, hidden = qwen["model.embed_tokens.weight"].shape
    sizes = dict(
        vocab_size=vocab,
        hidden_size=hidden,
        num_hidden_layers=len({k.split(".")[2] for k in qwen if k.startswith("model.layers.")}),
        intermediate_size=qwen["model.layers.0.mlp.gate_proj.weight"].shape[0],
        num_attention_heads=qwen["model.layers.0.self_attn.q_proj.weight"].shape[0] // HEAD,
        num_key_value_heads=qwen["model.layers.0.self_attn.k_proj.weight"].shape[0] // HEAD,
    )
    config = comfy.text_encoders.llama.Qwen25_7BVLI_Config
    comfy.text_encoders.llama.Qwen25_7BVLI_Config = lambda **kw: config(**{**sizes, **kw})
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
        if textmodel_json_config is None:  # SDClipModel's default: CLIP-L's sd1_clip_config.json
            textmodel_json_config = dict(clip_config)
        clip_init(self, *args, textmodel_json_config=textmodel_json_config, **kwargs)

    sd1_clip.SDClipModel.__init__ = clip_init_tiny


def main() -> None:
    torch.set_num_threads(1)
    OUT, WORKSPACE = ARGS
    paths = [f"{WORKSPACE}/models/{QWEN}", f"{WORKSPACE}/models/{CLIP_L}"]
    tiny_sizes(comfy.utils.load_torch_file(paths[0]), comfy.utils.load_torch_file(paths[1]))
    out = {"comfyui_commit": COMMIT, "files": {rel: sha256(p) for rel, p in zip((QWEN, CLIP_L), paths)}, "cases": {}}
    out["held_dtypes"] = {}
    for type_name, clip_type in TYPES.items():
        clip = comfy.sd.load_clip(ckpt_paths=paths, clip_type=clip_type)
        held = sorted({str(p.dtype) for p in clip.cond_stage_model.parameters()})
        out["held_dtypes"][type_name] = {
            part: sorted({str(p.dtype) for n, p in clip.cond_stage_model.named_parameters() if n.startswith(part)})
            for part in ("qwen25_7b.transformer.model.", "clip_l.transformer.")
        }
        for name, prompt in PROMPTS.items():
            tokens = clip.tokenize(prompt)
            ((cond, extra),) = clip.encode_from_tokens_scheduled(tokens)
            out["cases"][f"{type_name}/{name}"] = {
                "type": type_name,
                "prompt": prompt,
                "qwen_ids": [int(t) for chunk in tokens["qwen25_7b"] for t, *_ in chunk],
                "clip_ids": [[int(t) for t, *_ in chunk] for chunk in tokens["l"]],
                "cond": b64(cond),
                "pooled": b64(extra["pooled_output"]),
                "extra_keys": sorted(extra),
            }
            print(type_name, name, held, tuple(cond.shape), sorted(extra), file=sys.stderr)
    write_json(OUT, out)


if __name__ == "__main__":
    main()
