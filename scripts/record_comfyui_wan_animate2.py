"""Record what ComfyUI's Wan Animate 2 network computes on the tiny Animate 2 file (nodes/models/wan_demo.py:
diffusion_models/wan_animate_2_14B_tiny.safetensors), as the fixture tests/models/test_wan_animate2.py checks
(tests/models/fixtures/comfyui_wan_animate2.json.xz).

Animate 2 is newer than every ComfyUI that runs here, so the reference is the newest ComfyUI's own module
(Comfy-Org/ComfyUI comfy/ldm/wan/model_animate2.py, read at development time and kept outside the repository),
imported from REF_DIR on top of ComfyUI 0.10.0's comfy package (its WanModel, rope_encode, attention and ops are
what the module builds on). Nothing of ComfyUI is copied here. Run inside ComfyUI 0.10.0's environment:

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim>:<REF_DIR>:/work/main/scripts:. OMP_NUM_THREADS=1 \\
        <venv>/bin/python /work/main/scripts/record_comfyui_wan_animate2.py \\
        /work/main/tests/models/fixtures/comfyui_wan_animate2.json.xz <models dir> <input dir> \\
        /work/main/workflows_json/wan_animate2.json

ComfyUI builds Wan 2.1's image embedding for 1280-wide CLIP-H states; the tiny file's is 32 wide, so that one
width is read from the file (as scripts/record_comfyui_wan.py does). Attention is ComfyUI's attention_pytorch.
Recorded: the network's raw output on seeded inputs (odd latent size, a batch of two timesteps) with the pose
branch (default strengths; its own prompt and CLIP states with pose_strength and reference_image_strength set;
no CLIP vision at all), and without pose latents (the node's pose window excludes the step); and the workflow
workflows_json/wan_animate2.json run node by node with 0.10.0's node classes and the newest source's
WanAnimate2ToVideo and WAN_Animate2 model (extra_conds) from REF_DIR, as shipped and with a pose window,
pose_strength and reference_image_strength set: the frames VAEDecode gives. The tiny text encoder, VAE and CLIP
vision model are given to ComfyUI's classes as scripts/record_comfyui_wan.py does (its helpers are reused).
WanAnimate2Cache runs as a pass-through there: upstream's cache at dtype default changes no number.
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys

import torch

OUT, MODELS, INPUT, WORKFLOW = sys.argv[1:5]
sys.argv[1:] = [OUT, MODELS, INPUT, WORKFLOW, WORKFLOW]  # record_comfyui_wan reads its own arguments on import
import record_comfyui_wan as wan  # noqa: E402  (ComfyUI's modules, the tiny widths, the node runner)

sys.argv[1:] = ["--cpu"]
import comfy.cli_args

comfy.cli_args.args.cpu = True
import comfy.ldm.modules.attention as attention
import comfy.ldm.wan.model
import comfy.model_detection
import comfy.ops
import comfy.utils
import model_animate2_ref  # the newest ComfyUI's comfy/ldm/wan/model_animate2.py, outside the repository
from comfyui_recording import write_json  # noqa: E402

FILE = "diffusion_models/wan_animate_2_14B_tiny.safetensors"
TEXT_TOKENS = 512  # umt5's padded length, which the Wan network's image/text split assumes


def b64(t: torch.Tensor) -> dict:
    t = t.detach().to(torch.float32).contiguous()
    return {"shape": list(t.shape), "f32": base64.b64encode(t.numpy().tobytes()).decode()}


def main() -> None:
    path = f"{MODELS}/{FILE}"
    sd = {k: v.float() for k, v in comfy.utils.load_torch_file(path).items()}
    model_animate2_ref.optimized_attention = attention.attention_pytorch
    image_width = sd["img_emb.proj.0.weight"].shape[0]
    mlp = comfy.ldm.wan.model.MLPProj
    comfy.ldm.wan.model.MLPProj = lambda in_dim, out_dim, **kw: mlp(image_width, out_dim, **kw)
    dim = sd["head.modulation"].shape[-1]
    model = model_animate2_ref.WanAnimate2Model(
        in_dim=sd["patch_embedding.weight"].shape[1],
        dim=dim,
        ffn_dim=sd["blocks.0.ffn.0.weight"].shape[0],
        text_dim=sd["text_embedding.0.weight"].shape[1],
        out_dim=sd["head.head.weight"].shape[0] // 4,
        num_heads=dim // 128,
        num_layers=2,
        operations=comfy.ops.disable_weight_init,
        dtype=torch.float32,
    )
    model.load_state_dict(sd, strict=True)
    text_dim = sd["text_embedding.0.weight"].shape[1]
    gen = torch.Generator().manual_seed(39)
    b, frames, h, w = 2, 3, 5, 7  # frame 0 is the reference slot; odd sizes are padded to the 2x2 patch
    inputs = {
        "x": torch.randn(b, 36, frames, h, w, generator=gen),
        "timestep": torch.tensor([700.0, 250.0]),
        "context": torch.randn(b, TEXT_TOKENS, text_dim, generator=gen),
        "clip_fea": torch.randn(b, 257, image_width, generator=gen),
        "pose_latents": torch.randn(b, 16, frames - 1, h, w, generator=gen),
        "context_pose": torch.randn(b, TEXT_TOKENS, text_dim, generator=gen),
        "clip_fea_pose": torch.randn(b, 257, image_width, generator=gen),
    }
    cases = {
        "pose": {"pose_latents": True, "clip_fea": True},
        "pose_own_prompt_strengths": {
            "pose_latents": True,
            "clip_fea": True,
            "context_pose": True,
            "clip_fea_pose": True,
            "pose_strength": 0.6,
            "reference_strength": 1.4,
        },
        "pose_no_clip": {"pose_latents": True},
        "no_pose": {"clip_fea": True, "reference_strength": 0.5},
    }
    records = {}
    with torch.no_grad():
        for name, case in cases.items():
            kwargs = {k: inputs[k] for k, v in case.items() if v is True}
            kwargs.update({k: v for k, v in case.items() if v is not True})
            out = model(inputs["x"], inputs["timestep"], inputs["context"], **kwargs)
            records[name] = {"case": case, "out": b64(out)}
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    workflows = record_workflows()
    result = {
        "source": "Comfy-Org/ComfyUI comfy/ldm/wan/model_animate2.py (1e4169356e) on ComfyUI 0.10.0's comfy package",
        "file": FILE,
        "sha256": digest,
        "inputs": {k: b64(v) for k, v in inputs.items()},
        "cases": records,
        "workflows": workflows,
    }
    write_json(OUT, result)


def record_workflows() -> dict:
    """The shipped workflow and its variant, node by node with ComfyUI's classes (see the module docstring)."""
    import folder_paths
    import nodes_animate2_ref  # the newest source's node and model class, outside the repository

    folder_paths.set_input_directory(INPUT)
    for kind in ("diffusion_models", "text_encoders", "vae", "clip_vision"):
        folder_paths.add_model_folder_path(kind, f"{MODELS}/{kind}", is_default=True)
    wan.tiny_widths()
    detect = comfy.model_detection.detect_unet_config

    def detect_animate2(state_dict, key_prefix, metadata=None):  # the newest ComfyUI reads the file's config
        cfg = detect(state_dict, key_prefix, metadata=metadata)
        if cfg is not None and metadata is not None and "config" in metadata:
            cfg.update(json.loads(metadata["config"]).get("transformer", {}))
        return cfg

    comfy.model_detection.detect_unet_config = detect_animate2
    classes = wan.node_classes()
    import comfy_extras.nodes_wan

    import nodes

    classes.update(
        ImageBatch=nodes.ImageBatch,
        TrimVideoLatent=comfy_extras.nodes_wan.TrimVideoLatent,
        WanAnimate2ToVideo=nodes_animate2_ref.WanAnimate2ToVideo,
        WanAnimate2Cache=nodes_animate2_ref.WanAnimate2Cache,
    )
    wan.node_classes = lambda: classes
    with open(WORKFLOW) as f:
        prompt = json.load(f)
    variant = json.loads(json.dumps(prompt))
    node = next(v for v in variant.values() if v["class_type"] == "WanAnimate2ToVideo")
    node["inputs"].update(pose_end_percent=0.5, pose_strength=0.8, reference_image_strength=1.2)
    built = []
    init = nodes_animate2_ref.WAN_Animate2.__init__
    nodes_animate2_ref.WAN_Animate2.__init__ = lambda self, *a, **kw: (built.append(1), init(self, *a, **kw))[1]
    out = {}
    for name, p in (("shipped", prompt), ("pose_window", variant)):
        out[name] = {"prompt": p, **wan.run_workflow(p)}
    assert built, "the file did not load as Animate 2"
    return out


if __name__ == "__main__":
    main()
