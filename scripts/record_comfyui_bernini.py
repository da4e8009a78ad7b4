"""Record what ComfyUI's Bernini in-context path computes on the tiny Bernini-R file (nodes/models/wan_demo.py:
diffusion_models/wan2.2_bernini_r_high_noise_fp8_scaled_tiny.safetensors) and the tiny Wan 2.1 VAE, as the fixture
tests/models/test_wan_bernini.py checks (tests/models/fixtures/comfyui_bernini.json.xz).

Bernini is newer than every ComfyUI that runs here, so the reference is the newest ComfyUI's own code (Comfy-Org/ComfyUI
comfy/ldm/wan/model.py 0c9a69aefd: WanModel.forward_orig's context_latents, rope_encode's source_id and _forward's
rope per stream; comfy/model_base.py: WAN21.extra_conds' context_latents; comfy_extras/nodes_bernini.py:
BerniniConditioning), read at development time and kept outside the repository in REF_DIR (bernini_model_ref.py,
nodes_bernini_ref.py), imported on top of ComfyUI 0.10.0's comfy package (its WanModel, blocks, rope, attention, VAE
and common_upscale are what that code builds on). Nothing of ComfyUI is copied here. Run inside ComfyUI 0.10.0's
environment:

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim>:<REF_DIR>:/work/main/scripts:. OMP_NUM_THREADS=1 \\
        <venv>/bin/python /work/main/scripts/record_comfyui_bernini.py \\
        /work/main/tests/models/fixtures/comfyui_bernini.json.xz <models dir> <input dir> \\
        /work/main/workflows_json/bernini_video_editing.json

The scaled fp8 file's weights are taken as ComfyUI computes them (fp8 value x scale_weight in float32). Attention is
ComfyUI's attention_pytorch. Recorded: the network's raw output on seeded inputs (odd latent size, a batch of two
timesteps) with no context latents, one image stream, and three streams of different grids (a source video, a
reference video, an image); WAN21.extra_conds' conds for context latents; BerniniConditioning's outputs on seeded
images for each of its tasks (text to video, video to video with a resize and cut, reference images in two slots one
of them a batch of two scaled down, a reference video, reference images alone); and the node's object_info (its
schema serialised by 0.10.0's io).
"""

from __future__ import annotations

import hashlib
import json
import sys

import torch
from comfyui_recording import b64, comfyui_on_cpu, png_rgb, run_node, write_json

OUT, MODELS, INPUT, WORKFLOW = sys.argv[1:5]
sys.argv[1:] = [OUT, MODELS, INPUT, WORKFLOW, WORKFLOW]  # record_comfyui_wan reads its own arguments on import
import record_comfyui_wan as wan  # noqa: E402  (ComfyUI's modules, the tiny widths, the node helpers)

comfyui_on_cpu()
import bernini_model_ref  # noqa: E402  (the newest source's Bernini parts, outside the repository)
import comfy.latent_formats  # noqa: E402
import comfy.ldm.modules.attention as attention  # noqa: E402
import comfy.ldm.wan.model  # noqa: E402
import comfy.model_management  # noqa: E402
import comfy.ops  # noqa: E402
import comfy.sd  # noqa: E402
import comfy.utils  # noqa: E402

comfy.model_management.intermediate_dtype = lambda: torch.float32  # newer than 0.10.0: float32 on a CPU
import nodes_bernini_ref  # noqa: E402  (the newest source's node, outside the repository)

FILE = "diffusion_models/wan2.2_bernini_r_high_noise_fp8_scaled_tiny.safetensors"
VAE = "vae/wan_2.1_vae_tiny.safetensors"
TEXT_TOKENS = 16


def seeded(gen: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=gen)


def dequantized(sd: dict) -> dict:
    """ComfyUI's scaled fp8 weights as it computes them: the stored value times scale_weight, in float32."""
    out = {}
    for key, value in sd.items():
        if key == "scaled_fp8" or key.endswith((".scale_weight", ".scale_input")):
            continue
        scale = sd.get(key[: -len("weight")] + "scale_weight") if key.endswith(".weight") else None
        out[key] = value.float() * scale.float() if scale is not None else value.float()
    return out


def build_model(sd: dict) -> torch.nn.Module:
    comfy.ldm.wan.model.optimized_attention = attention.attention_pytorch
    dim = sd["head.modulation"].shape[-1]
    model = bernini_model_ref.BerniniWanModel(
        model_type="t2v",
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
    return model.eval()


def record_network(model: torch.nn.Module, text_dim: int) -> tuple[dict, dict]:
    gen = torch.Generator().manual_seed(51)
    b, frames, h, w = 2, 3, 5, 7
    inputs = {
        "x": seeded(gen, b, 16, frames, h, w),
        "timestep": torch.tensor([700.0, 250.0]),
        "context": seeded(gen, b, TEXT_TOKENS, text_dim),
        "source": seeded(gen, b, 16, frames, h, w),
        "ref_video": seeded(gen, b, 16, 2, 3, 5),
        "image": seeded(gen, b, 16, 1, 6, 4),
    }
    cases = {"plain": [], "image": ["image"], "three_streams": ["source", "ref_video", "image"]}
    records = {}
    with torch.no_grad():
        for name, streams in cases.items():
            kwargs = {"context_latents": [inputs[s] for s in streams]} if streams else {}
            out = model(inputs["x"], inputs["timestep"], inputs["context"], **kwargs)
            records[name] = {"streams": streams, "out": b64(out)}
    return {k: b64(v) for k, v in inputs.items()}, records


def record_extra_conds() -> dict:
    gen = torch.Generator().manual_seed(52)
    latents = [seeded(gen, 1, 16, 2, 3, 4), seeded(gen, 1, 16, 1, 5, 2)]
    base = object.__new__(comfy.model_base.WAN21)  # only process_latent_in's latent format is read
    object.__setattr__(base, "latent_format", comfy.latent_formats.Wan21())
    cond = bernini_model_ref.extra_conds_context(base, latents)
    return {"latents": [b64(t) for t in latents], "conds": [b64(t) for t in cond.cond]}


def describe(cond: list) -> list:
    out = []
    for _, opts in cond:
        out.append({k: [b64(t) for t in v] if k == "context_latents" else v for k, v in opts.items()})
    return out


def record_nodes(vae) -> dict:
    gen = torch.Generator().manual_seed(53)
    images = {
        "source_video": torch.rand(10, 24, 40, 3, generator=gen),
        "reference_video": torch.rand(5, 20, 36, 3, generator=gen),
        "reference_image_0": torch.rand(2, 50, 30, 3, generator=gen),
        "reference_image_1": torch.rand(1, 24, 40, 4, generator=gen),
    }
    base = {"width": 64, "height": 48, "length": 9, "batch_size": 1}
    cases = {
        "t2v": {**base, "batch_size": 2},
        "v2v": {**base, "source_video": True},
        "rv2v": {**base, "source_video": True, "reference_images": True, "ref_max_size": 32},
        "ads2v": {**base, "length": 5, "source_video": True, "reference_video": True},
        "r2v": {**base, "reference_images": True},
    }
    cond = [[torch.zeros(1, 4, 8), {}]]
    records = {}
    for name, case in cases.items():
        kwargs = {}
        for k, v in case.items():
            if k == "reference_images":
                kwargs[k] = {n: images[n] for n in ("reference_image_1", "reference_image_0")}
            else:
                kwargs[k] = images[k] if v is True else v
        out = nodes_bernini_ref.BerniniConditioning.execute(cond, cond, vae, **kwargs)
        pos, neg, latent = tuple(out.result) if hasattr(out, "result") else out
        records[name] = {
            "case": case,
            "positive": describe(pos),
            "negative": describe(neg),
            "latent": {k: b64(v) for k, v in latent.items()},
        }
    return {"images": {k: b64(v) for k, v in images.items()}, "cases": records}


def bernini_wan_models() -> None:
    """ComfyUI 0.10.0's WAN21 with the newest source's Bernini parts: its network class and extra_conds' streams."""
    import comfy.model_base

    comfy.ldm.wan.model.WanModel = bernini_model_ref.BerniniWanModel  # WAN21 looks its network class up here
    extra_conds = comfy.model_base.WAN21.extra_conds

    def with_streams(self, **kwargs):
        out = extra_conds(self, **kwargs)
        if kwargs.get("context_latents") is not None:
            out["context_latents"] = bernini_model_ref.extra_conds_context(self, kwargs["context_latents"])
        return out

    comfy.model_base.WAN21.extra_conds = with_streams


def record_workflow() -> dict:
    """workflows_json/bernini_video_editing.json node by node with ComfyUI 0.10.0's node classes, the newest
    source's BerniniConditioning and Bernini network: the frames VAEDecode gives."""
    import comfy_extras.nodes_custom_sampler as custom
    import comfy_extras.nodes_video as video
    import folder_paths

    folder_paths.set_input_directory(INPUT)
    for kind in ("diffusion_models", "text_encoders", "vae", "loras"):
        folder_paths.add_model_folder_path(kind, f"{MODELS}/{kind}", is_default=True)
    wan.tiny_widths()
    bernini_wan_models()
    classes = wan.node_classes()
    classes.update(
        LoadVideo=video.LoadVideo,
        GetVideoComponents=video.GetVideoComponents,
        KSamplerSelect=custom.KSamplerSelect,
        BasicScheduler=custom.BasicScheduler,
        SplitSigmas=custom.SplitSigmas,
        SamplerCustom=custom.SamplerCustom,
        BerniniConditioning=nodes_bernini_ref.BerniniConditioning,
    )
    with open(WORKFLOW) as f:
        shipped = json.load(f)
    return {
        "prompt": shipped,
        "frames": frames_of(shipped, classes),
        "frames_without_loras": frames_of(without_loras(shipped), classes),
    }


def without_loras(prompt: dict) -> dict:
    """The prompt with each LoraLoaderModelOnly's consumers fed by its model input (the experts as loaded)."""
    loras = {k: v["inputs"]["model"] for k, v in prompt.items() if v["class_type"] == "LoraLoaderModelOnly"}
    out = {}
    for key, node in prompt.items():
        if key in loras:
            continue
        inputs = {k: loras[v[0]] if isinstance(v, list) and v[0] in loras else v for k, v in node["inputs"].items()}
        out[key] = {**node, "inputs": inputs}
    return out


def frames_of(prompt: dict, classes: dict) -> dict:
    """The frames the prompt's CreateVideo shows (its VAEDecode's), run node by node."""
    results: dict[str, tuple] = {}

    def value(v):
        return run(v[0])[v[1]] if isinstance(v, list) else v

    def run(node_id: str) -> tuple:
        if node_id not in results:
            node = prompt[node_id]
            inputs = {}
            for k, v in node["inputs"].items():
                group, dot, item = k.partition(".")
                if dot:  # the web UI's dotted autogrow names: one dict per group
                    inputs.setdefault(group, {})[item] = value(v)
                else:
                    inputs[k] = value(v)
            results[node_id] = run_node(classes[node["class_type"]], inputs)
        return results[node_id]

    (create,) = [v for v in prompt.values() if v["class_type"] == "CreateVideo"]
    return png_rgb(run(create["inputs"]["images"][0])[0])


def main() -> None:
    import comfy.model_base  # noqa: F401  (record_extra_conds reads it)

    path = f"{MODELS}/{FILE}"
    sd = dequantized(comfy.utils.load_torch_file(path))
    model = build_model(sd)
    inputs, cases = record_network(model, sd["text_embedding.0.weight"].shape[1])
    vae = comfy.sd.VAE(sd=comfy.utils.load_torch_file(f"{MODELS}/{VAE}"))
    digests = {}
    for name in (FILE, VAE):
        with open(f"{MODELS}/{name}", "rb") as f:
            digests[name] = hashlib.sha256(f.read()).hexdigest()
    write_json(
        OUT,
        {
            "source": "Comfy-Org/ComfyUI comfy/ldm/wan/model.py (0c9a69aefd), comfy/model_base.py, "
            "comfy_extras/nodes_bernini.py on ComfyUI 0.10.0's comfy package",
            "file": FILE,
            "sha256": digests,
            "inputs": inputs,
            "cases": cases,
            "extra_conds": record_extra_conds(),
            "nodes": record_nodes(vae),
            "workflow": record_workflow(),
            "object_info": {
                "BerniniConditioning": {
                    **nodes_bernini_ref.BerniniConditioning.GET_NODE_INFO_V1(),
                    "python_module": "comfy_extras.nodes_bernini",
                }
            },
        },
    )


if __name__ == "__main__":
    main()
