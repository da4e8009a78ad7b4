"""Record what upstream ComfyUI 0.10.0 (commit 79cdbc81 of hiddenswitch/ComfyUI; 0.3.64 has no Anima) computes on
the tiny Anima files, as the fixture tests/models/fixtures/comfyui_anima.json.xz.

Run inside that ComfyUI's own environment (nothing of ComfyUI is copied here), after `comfy-cluster demo-models`:

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<site>:. OMP_NUM_THREADS=1 <venv>/bin/python \\
        /work/main/scripts/record_comfyui_anima.py <fixture> <workspace> /work/main/workflows_json/anima_base_v1.json

ComfyUI fixes the released widths (the DiT's 28 blocks of 16 heads and 1024-wide context, the LLM adapter's
6 blocks 1024 wide, Qwen3 0.6B's config, the VAE's base width) and tells the 0.6B by its width; this script gives
its classes the tiny sizes read from the files' shapes and changes nothing else. Recorded: the text encoder's
conditioning with its T5 ids and weights for a few prompts (weighting syntax, an empty prompt); the adapter's
context as model_base.Anima's extra_conds builds it and the DiT's raw output on seeded inputs; and the shipped
workflow (the web UI's Anima Base v1.0 template on the tiny files) run node by node with 0.10.0's node classes,
SaveImage replaced by what it would write.
"""

from __future__ import annotations

import dataclasses
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
    tiny_anima_in_comfyui,
    write_json,
)

OUT, WORKSPACE, WORKFLOW = sys.argv[1:4]
comfyui_on_cpu()
import comfy.ldm.anima.model
import comfy.ldm.wan.vae
import comfy.model_detection
import comfy.sd
import comfy.text_encoders.llama
import comfy.utils
import folder_paths

COMMIT = "79cdbc81"
DIT = "diffusion_models/anima_tiny.safetensors"
TEXT_ENCODER = "text_encoders/qwen_3_06b_base_tiny.safetensors"
VAE = "vae/qwen_image_vae_tiny.safetensors"
# ResolutionSelector (newer than 0.10.0) for the workflow's inputs: 1:1 at 0.1 megapixels in multiples of 16 is
# sqrt(100000) = 316.2 rounded to 320 (the newest ComfyUI's comfy_extras/nodes_resolution.py rounds to the multiple).
RESOLUTION = {("1:1 (Square)", 0.1, 16): (320, 320)}
PROMPTS = ["a cat on a red sofa, anime style", "score_9, (masterpiece:1.3), a (blue:0.8) sky", ""]
# (seed, latent shape, Qwen3 rows, T5 ids, timestep, weighted)
CASES = {
    "one": (1, [1, 16, 1, 8, 8], 7, 5, 0.7, False),
    "weighted_odd_size": (2, [1, 16, 1, 6, 10], 4, 9, 0.3, True),
    "batch_two": (3, [2, 16, 1, 8, 6], 6, 3, 0.95, False),
}


def tiny_sizes() -> None:
    te = comfy.utils.load_torch_file(f"{WORKSPACE}/models/{TEXT_ENCODER}")
    hidden = te["model.layers.0.post_attention_layernorm.weight"].shape[0]
    head = te["model.layers.0.self_attn.q_norm.weight"].shape[0]
    config = comfy.text_encoders.llama.Qwen3_06BConfig

    @dataclasses.dataclass
    class TinyQwen3(config):
        head_dim = head  # a class attribute of ComfyUI's config, not a field

    sizes = {
        "hidden_size": hidden,
        "intermediate_size": te["model.layers.0.mlp.gate_proj.weight"].shape[0],
        "num_hidden_layers": len({k.split(".")[2] for k in te if k.startswith("model.layers.")}),
        "num_attention_heads": te["model.layers.0.self_attn.q_proj.weight"].shape[0] // head,
        "num_key_value_heads": te["model.layers.0.self_attn.k_proj.weight"].shape[0] // head,
    }
    comfy.text_encoders.llama.Qwen3_06BConfig = lambda **kw: TinyQwen3(**{**sizes, **kw})
    detect_te = comfy.sd.detect_te_model

    def detect_te_tiny(sd):
        if sd.get("model.layers.0.post_attention_layernorm.weight", torch.empty(0)).shape[0] == hidden:
            return comfy.sd.TEModel.QWEN3_06B
        return detect_te(sd)

    comfy.sd.detect_te_model = detect_te_tiny

    tiny_anima_in_comfyui(f"{WORKSPACE}/models/{DIT}")
    vae_dim = comfy.utils.load_torch_file(f"{WORKSPACE}/models/{VAE}")["encoder.conv1.weight"].shape[0]
    wan = comfy.ldm.wan.vae.WanVAE
    comfy.ldm.wan.vae.WanVAE = lambda **cfg: wan(**{**cfg, "dim": vae_dim})


def run_workflow(prompt: dict) -> dict:
    """The workflow node by node in dependency order with 0.10.0's node classes (ComfySwitchNode given both
    inputs: the same choice); SaveImage replaced by what it would write."""
    from comfy_extras import nodes_logic, nodes_primitive

    def newer(class_type: str, inputs: dict) -> tuple | None:
        if class_type == "ResolutionSelector":  # newer than 0.10.0: its size for the shipped inputs
            return RESOLUTION[(inputs["aspect_ratio"], inputs["megapixels"], inputs["multiple"])]
        return None

    return run_prompt(prompt, node_classes(nodes_logic, nodes_primitive), newer, max_values=MAX_RECORDED_VALUES)


def inputs(seed: int, shape: list[int], rows: int, ids: int, width: int, weighted: bool):
    """(x, Qwen3 states, T5 ids, weights or None) drawn from one generator in this order (the test draws them
    alike)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g)
    states = torch.randn(1, rows, width, generator=g)
    t5 = torch.randint(0, 32128, (ids,), generator=g)
    weights = 0.5 + torch.rand(ids, generator=g) if weighted else None
    return x, states, t5, weights


def main() -> None:
    torch.set_num_threads(1)
    tiny_sizes()
    out = {
        "comfyui_commit": COMMIT,
        "recorded_by": "scripts/record_comfyui_anima.py",
        "files": {p: sha256(f"{WORKSPACE}/models/{p}") for p in (DIT, TEXT_ENCODER, VAE)},
        "text": {},
        "cases": {},
    }
    clip = comfy.sd.load_clip(
        ckpt_paths=[f"{WORKSPACE}/models/{TEXT_ENCODER}"], clip_type=comfy.sd.CLIPType.STABLE_DIFFUSION
    )
    for prompt in PROMPTS:
        ((cond, extra),) = clip.encode_from_tokens_scheduled(clip.tokenize(prompt))
        out["text"][prompt] = {
            "cond": b64(cond),
            "t5xxl_ids": extra["t5xxl_ids"].tolist(),
            "t5xxl_weights": extra["t5xxl_weights"].tolist(),
        }
    model = comfy.sd.load_diffusion_model(f"{WORKSPACE}/models/{DIT}").model
    width = model.diffusion_model.llm_adapter.blocks[0].cross_attn.k_proj.weight.shape[1]
    for name, (seed, shape, rows, ids, t, weighted) in CASES.items():
        x, states, t5, weights = inputs(seed, shape, rows, ids, width, weighted)
        with torch.no_grad():
            conds = model.extra_conds(
                cross_attn=states, t5xxl_ids=t5, t5xxl_weights=weights, device=torch.device("cpu"), noise=x
            )
            context = conds["c_crossattn"].cond
            result = model.diffusion_model(x, torch.tensor([t] * shape[0]), context.expand(shape[0], -1, -1))
        out["cases"][name] = {"context": b64(context), "out": b64(result)}
    for folder in ("diffusion_models", "text_encoders", "vae", "loras"):
        folder_paths.add_model_folder_path(folder, f"{WORKSPACE}/models/{folder}", is_default=True)
    with open(WORKFLOW) as f:
        out["workflow"] = run_workflow(json.load(f))
    write_json(OUT, out)


if __name__ == "__main__":
    main()
