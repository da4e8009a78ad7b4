"""Record what ComfyUI 0.3.64 (commit a125cd84) computes for LTX-Video 0.9's text encoder (CLIPLoader type ltxv) and
the web UI's two LTX-Video templates on the tiny files, as tests/models/test_ltxv_text.py and
tests/e2e/test_ltxv_workflows.py check them (tests/models/fixtures/comfyui_ltxv_workflows.json.xz).

Run inside that ComfyUI's own environment (nothing of ComfyUI is copied here), after `comfy-cluster demo-models`
and scripts/ltxv_workflow.py:

    cd <ComfyUI 0.3.64 source> && PYTHONPATH=<torchvision shim>:/work/main/scripts:. OMP_NUM_THREADS=1 \\
        <venv>/bin/python /work/main/scripts/record_comfyui_ltxv_workflows.py <fixture> <workspace>

ComfyUI fixes T5-XXL's released config and tokenizer; as scripts/record_comfyui_chroma.py does, this script gives
its T5 the tiny sizes read from flux-tiny-t5's shapes and the tiny T5's own vocabulary (a unigram tokenizer of
nodes/models/configs/flux-tiny/t5_vocab.json in place of T5-XXL's) and changes nothing else (but
--fp32-text-enc): LTXV's tokenizer settings, Mochi's masked T5, model_base.LTXV, the nodes and the samplers are
ComfyUI's. Recorded: the two templates' prompts encoded (conditioning and attention mask); and each shipped
workflow (workflows_json/ltxv_*.json) run node by node with 0.3.64's node classes, a SaveImage of VAEDecode's frames
standing in for CreateVideo and SaveVideo (what it would write)."""

from __future__ import annotations

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
comfyui_on_cpu(flags=("--fp32-text-enc",))
import comfy.cli_args  # noqa: E402

comfy.cli_args.args.fp32_text_enc = True
import comfy.sd  # noqa: E402
import comfy.sd1_clip  # noqa: E402
import comfy.text_encoders.lt  # noqa: E402
import comfy.utils  # noqa: E402
import folder_paths  # noqa: E402

COMMIT = "a125cd84"
REPO = "/work/main"
CHECKPOINT = "checkpoints/ltx-video-2b-v0.9_tiny.safetensors"
TEXT_ENCODER = "text_encoders/flux-tiny-t5.safetensors"
VOCAB = f"{REPO}/nodes/models/configs/flux-tiny/t5_vocab.json"
WORKFLOWS = ("ltxv_image_to_video", "ltxv_text_to_video")
FRAMES_NODE = "900"  # the SaveImage added beside the template's SaveVideo


def with_frames(prompt: dict) -> dict:
    (decode,) = [k for k, v in prompt.items() if v["class_type"] == "VAEDecode"]
    frames = {"class_type": "SaveImage", "inputs": {"images": [decode, 0], "filename_prefix": "ltxv_frames"}}
    return {**prompt, FRAMES_NODE: frames}


def main() -> None:
    from comfy_extras import nodes_custom_sampler, nodes_lt

    torch.set_num_threads(1)
    tiny_t5_in_comfyui(f"{WORKSPACE}/models/{TEXT_ENCODER}", VOCAB, comfy.text_encoders.lt)
    out = {
        "comfyui_commit": COMMIT,
        "recorded_by": "scripts/record_comfyui_ltxv_workflows.py",
        "files": {p: sha256(f"{WORKSPACE}/models/{p}") for p in (CHECKPOINT, TEXT_ENCODER)},
        "text": [],
        "workflows": {},
    }
    clip = comfy.sd.load_clip(ckpt_paths=[f"{WORKSPACE}/models/{TEXT_ENCODER}"], clip_type=comfy.sd.CLIPType.LTXV)
    prompts = []
    for name in WORKFLOWS:
        with open(f"{REPO}/workflows_json/{name}.json") as f:
            prompt = json.load(f)
        prompts += [v["inputs"]["text"] for v in prompt.values() if v["class_type"] == "CLIPTextEncode"]
    for text in [*dict.fromkeys(prompts), "a (red:1.3) fox"]:
        tokens = clip.tokenize(text)
        ((cond, extra),) = clip.encode_from_tokens_scheduled(tokens)
        out["text"].append(
            {
                "prompt": text,
                "tokens": tokens["t5xxl"],
                "cond": b64(cond),
                "attention_mask": b64(extra["attention_mask"]),
            }
        )
    for folder in ("checkpoints", "text_encoders"):
        folder_paths.add_model_folder_path(folder, f"{WORKSPACE}/models/{folder}", is_default=True)
    folder_paths.set_input_directory(f"{WORKSPACE}/input")
    classes = node_classes(nodes_custom_sampler, nodes_lt)
    for name in WORKFLOWS:
        with open(f"{REPO}/workflows_json/{name}.json") as f:
            prompt = with_frames(json.load(f))
        out["workflows"][name] = run_prompt(prompt, classes, max_values=MAX_RECORDED_VALUES)
    write_json(OUT, out)


if __name__ == "__main__":
    main()
