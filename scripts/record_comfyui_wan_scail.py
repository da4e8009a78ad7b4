"""Record what ComfyUI's Wan SCAIL-2 network and nodes compute on the tiny SCAIL-2 file (nodes/models/wan_demo.py:
diffusion_models/wan2.1_14B_SCAIL_2_tiny.safetensors) and the tiny Wan 2.1 VAE, as the fixture
tests/models/test_wan_scail.py checks (tests/models/fixtures/comfyui_wan_scail.json.xz).

SCAIL-2 is newer than every ComfyUI that runs here, so the reference is the newest ComfyUI's own code (Comfy-Org/ComfyUI
comfy/ldm/wan/model.py 56bf4365f7: SCAILWanModel, SCAIL2WanModel; comfy/model_base.py: WAN21_SCAIL2's extra_conds;
comfy_extras/nodes_scail.py de974be0f4: WanSCAILToVideo, SCAIL2ColoredMask), read at development time and kept
outside the repository in REF_DIR (scail_model_ref.py, nodes_scail_ref.py), imported on top of ComfyUI 0.10.0's comfy
package (its WanModel, rope, attention, VAE and common_upscale are what that code builds on). Two helpers the node
module imports are newer than 0.10.0 and are given there as the newest source defines them: the SAM3 tracker's
unpack_masks (8 pixels a byte, lowest bit first) and node_helpers.conditioning_set_values_with_timestep_range.
Nothing of ComfyUI is copied here. Run inside ComfyUI 0.10.0's environment:

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim>:<REF_DIR>:/work/main/scripts:. OMP_NUM_THREADS=1 \\
        <venv>/bin/python /work/main/scripts/record_comfyui_wan_scail.py \\
        /work/main/tests/models/fixtures/comfyui_wan_scail.json.xz <models dir> <input dir> \\
        /work/main/workflows_json/wan_scail2.json

ComfyUI builds Wan 2.1's image embedding for 1280-wide CLIP-H states and a 4096-wide text embedding; the tiny file's
widths are read from it. Attention is ComfyUI's attention_pytorch.
Recorded: the network's raw output on seeded inputs (odd latent size, a batch of two timesteps, two reference frames
with their mask frames, the pose latent at half size with its driving masks) in animation mode, replacement mode,
with one reference and no masks (SCAIL's inputs), without CLIP states, and without any of them; the conds
WAN21_SCAIL2's extra_conds makes from WanSCAILToVideo's values; WanSCAILToVideo's outputs on seeded images
(replacement mode with two references, their masks, a pose window, pose_strength, an offset and previous frames;
and animation mode with one reference and no masks); and SCAIL2ColoredMask's images on a seeded track of three
objects (each sort, object_indices, both modes; reference masks as a track, as a MASK and absent); and the workflow
workflows_json/wan_scail2.json run node by node with 0.10.0's node classes and the newest source's WanSCAILToVideo
and WAN21_SCAIL2 model (loaded by UNETLoader through the newest detection rule and model config): the frames
VAEDecode gives. The tiny text encoder, VAE and CLIP vision model are given to ComfyUI's classes as
scripts/record_comfyui_wan.py does (its helpers are reused).
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
import comfy.ldm.modules.attention as attention  # noqa: E402
import comfy.ldm.wan.model  # noqa: E402
import comfy.model_management  # noqa: E402
import comfy.ops  # noqa: E402
import comfy.sd  # noqa: E402
import comfy.utils  # noqa: E402

comfy.model_management.intermediate_dtype = lambda: torch.float32  # newer than 0.10.0: float32 on a CPU
import nodes_scail_ref  # noqa: E402  (the newest source's nodes, outside the repository)
import scail_model_ref  # noqa: E402  (the newest source's SCAIL classes, outside the repository)

FILE = "diffusion_models/wan2.1_14B_SCAIL_2_tiny.safetensors"
VAE = "vae/wan_2.1_vae_tiny.safetensors"
TEXT_TOKENS = 16  # the network reads any prompt length (the CLIP tokens are told apart by their count)
CLIP_TOKENS = 9


def seeded(gen: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=gen)


def build_model(sd: dict) -> torch.nn.Module:
    comfy.ldm.wan.model.optimized_attention = attention.attention_pytorch
    image_width = sd["img_emb.proj.0.weight"].shape[0]
    mlp = comfy.ldm.wan.model.MLPProj
    comfy.ldm.wan.model.MLPProj = lambda in_dim, out_dim, **kw: mlp(image_width, out_dim, **kw)
    dim = sd["head.modulation"].shape[-1]
    model = scail_model_ref.SCAIL2WanModel(
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


def record_network(model: torch.nn.Module, text_dim: int, image_width: int) -> tuple[dict, dict]:
    gen = torch.Generator().manual_seed(39)
    b, frames, h, w = 2, 3, 5, 7
    ph, pw = (h + 1) // 2, (w + 1) // 2
    inputs = {
        "x": seeded(gen, b, 20, frames, h, w),
        "timestep": torch.tensor([700.0, 250.0]),
        "context": seeded(gen, b, TEXT_TOKENS, text_dim),
        "clip_fea": seeded(gen, b, CLIP_TOKENS, image_width),
        "reference_latent": seeded(gen, b, 20, 2, h, w),
        "pose_latents": seeded(gen, b, 20, frames, ph, pw),
        "ref_mask_latents": (torch.rand(b, 28, 2 + frames, h, w, generator=gen) > 0.5).float(),
        "sam_latents": (torch.rand(b, 28, frames, ph, pw, generator=gen) > 0.5).float(),
        "one_reference": seeded(gen, b, 20, 1, h, w),
    }
    full = ["clip_fea", "reference_latent", "pose_latents", "ref_mask_latents", "sam_latents"]
    cases = {
        "animation": {**dict.fromkeys(full, True), "ref_mask_flag": True},
        "replacement": {**dict.fromkeys(full, True), "ref_mask_flag": False},
        "one_reference_no_masks": {"clip_fea": True, "reference_latent": "one_reference", "pose_latents": True},
        "replacement_no_clip": {"reference_latent": True, "pose_latents": True, "ref_mask_flag": False},
        "plain": {"clip_fea": True},
    }
    records = {}
    with torch.no_grad():
        for name, case in cases.items():
            kwargs = {}
            for k, v in case.items():
                kwargs[k] = v if k == "ref_mask_flag" else inputs[k] if v is True else inputs[v]
            out = model(inputs["x"], inputs["timestep"], inputs["context"], **kwargs)
            records[name] = {"case": case, "out": b64(out)}
    return {k: b64(v) for k, v in inputs.items()}, records


def record_extra_conds() -> dict:
    """WAN21_SCAIL2's extra_conds on WanSCAILToVideo-shaped values (through ComfyUI's BaseModel)."""
    import comfy.latent_formats

    gen = torch.Generator().manual_seed(41)
    values = {
        "reference_latents": [seeded(gen, 1, 16, 1, 4, 6), seeded(gen, 1, 16, 1, 4, 6)],
        "pose_video_latent": seeded(gen, 1, 16, 2, 2, 3),
        "driving_mask_28ch": torch.rand(1, 2, 28, 2, 3, generator=gen),
        "ref_mask_28ch": torch.rand(1, 4, 28, 4, 6, generator=gen),
        "ref_mask_flag": False,
    }
    base = object.__new__(scail_model_ref.WAN21_SCAIL2)  # only process_latent_in's latent format is read
    object.__setattr__(base, "latent_format", comfy.latent_formats.Wan21())
    # the SCAIL parts of extra_conds alone (WAN21's own need a whole model: it answers nothing here)
    import comfy.model_base

    base_extra = comfy.model_base.WAN21.extra_conds
    comfy.model_base.WAN21.extra_conds = lambda self, **kw: {}
    try:
        conds = scail_model_ref.WAN21_SCAIL2.extra_conds(base, **values)
    finally:
        comfy.model_base.WAN21.extra_conds = base_extra
    return {
        "values": {k: b64(v) for k, v in values.items() if torch.is_tensor(v)}
        | {f"reference_latents.{i}": b64(v) for i, v in enumerate(values["reference_latents"])},
        "conds": {k: (b64(v.cond) if torch.is_tensor(v.cond) else v.cond) for k, v in conds.items()},
    }


def describe(cond: list) -> list:
    out = []
    for _, opts in cond:
        entry = {}
        for k, v in opts.items():
            if torch.is_tensor(v):
                entry[k] = b64(v)
            elif k == "reference_latents":
                entry[k] = [b64(t) for t in v]
            else:
                entry[k] = v
        out.append(entry)
    return out


def record_nodes(vae) -> dict:
    gen = torch.Generator().manual_seed(43)
    colours = torch.tensor([[0, 0, 0], [1, 1, 1], [0, 0, 1], [1, 0, 0], [0, 1, 0], [1, 0, 1]], dtype=torch.float32)

    def colour_video(t: int, hh: int, ww: int) -> torch.Tensor:
        index = torch.randint(0, len(colours), (t, hh // 4, ww // 4), generator=gen)
        return colours[index].repeat_interleave(4, 1).repeat_interleave(4, 2)

    images = {
        "reference_image": torch.rand(2, 28, 24, 3, generator=gen),
        "reference_image_mask": colour_video(2, 28, 24),
        "pose_video": torch.rand(15, 20, 28, 3, generator=gen),
        "pose_video_mask": colour_video(14, 20, 28),
        "previous_frames": torch.rand(7, 26, 22, 3, generator=gen),
    }
    cond = [[torch.zeros(1, 4, 8), {}]]
    cases = {
        "replacement": {
            "width": 64,
            "height": 96,
            "length": 9,
            "batch_size": 1,
            "pose_strength": 0.8,
            "pose_start": 0.1,
            "pose_end": 0.9,
            "video_frame_offset": 6,
            "previous_frame_count": 5,
            "replacement_mode": True,
            "reference_image": True,
            "reference_image_mask": True,
            "pose_video": True,
            "pose_video_mask": True,
            "previous_frames": True,
        },
        "animation": {
            "width": 64,
            "height": 64,
            "length": 13,
            "batch_size": 2,
            "pose_strength": 1.0,
            "pose_start": 0.0,
            "pose_end": 1.0,
            "video_frame_offset": 0,
            "previous_frame_count": 5,
            "replacement_mode": False,
            "reference_image": True,
            "pose_video": True,
        },
    }
    records = {}
    for name, case in cases.items():
        kwargs = {k: images[k] if k in images else v for k, v in case.items()}
        if name == "animation":  # one reference
            kwargs["reference_image"] = kwargs["reference_image"][:1]
        pos, neg, latent, offset = nodes_scail_ref.WanSCAILToVideo.execute(cond, cond, vae, **kwargs)
        records[name] = {
            "case": case,
            "positive": describe(pos),
            "negative": describe(neg),
            "latent": {k: b64(v) for k, v in latent.items()},
            "video_frame_offset": offset,
        }
    return {"images": {k: b64(v) for k, v in images.items()}, "cases": records}


def pack(masks: torch.Tensor) -> torch.Tensor:
    """bool [..., W] -> [..., W/8] uint8, the first pixel in the lowest bit (the SAM3 tracker's layout)."""
    bits = masks.reshape(*masks.shape[:-1], -1, 8).to(torch.uint8) << torch.arange(8, dtype=torch.uint8)
    return bits.sum(-1).to(torch.uint8)


def record_colored_masks() -> dict:
    gen = torch.Generator().manual_seed(45)
    t, n, h, w = 5, 3, 12, 16
    masks = torch.rand(t, n, h, w, generator=gen) > 0.7
    masks[:2, 1] = False  # object 1 shows from frame 2 on
    masks[:, 2, :, :8] = False  # object 2 on the right
    ref = torch.rand(2, 2, h, w, generator=gen) > 0.6
    driving = {"packed_masks": pack(masks), "orig_size": (24, 32), "n_frames": t, "scores": [0.9, 0.8, 0.7]}
    reference = {"packed_masks": pack(ref), "orig_size": (12, 16), "n_frames": 2, "scores": [0.5, 0.4]}
    plain_mask = torch.rand(2, 10, 14, generator=gen)
    empty = {"packed_masks": None, "orig_size": (6, 8), "n_frames": 3}
    cases = {
        "left_to_right_replacement_track": ("", "left_to_right", True, "track"),
        "area_animation_mask": ("", "area", False, "mask"),
        "none_indices_absent": ("2,0,7,x", "none", False, None),
        "left_to_right_indices_track": ("1, 2", "left_to_right", False, "track"),
        "empty_driving": ("", "left_to_right", True, "empty"),
    }
    records = {}
    for name, (indices, sort_by, replacement, refs) in cases.items():
        ref_input = {"track": reference, "mask": plain_mask, None: None, "empty": None}[refs]
        drv = empty if refs == "empty" else driving
        video, ref_out = nodes_scail_ref.SCAIL2ColoredMask.execute(drv, indices, sort_by, replacement, ref_input)
        records[name] = {
            "args": [indices, sort_by, replacement, refs],
            "pose_video_mask": b64(video),
            "reference_image_mask": b64(ref_out),
        }
    return {
        "masks": b64(masks.float()),
        "reference": b64(ref.float()),
        "plain_mask": b64(plain_mask),
        "cases": records,
    }


def scail_detection() -> None:
    """ComfyUI 0.10.0 loads the tiny SCAIL-2 file as the newest one does: the model type from its keys (the
    newest model_detection's rule) and a supported-model entry for it (the newest WAN21_SCAIL2 config) giving the
    newest source's WAN21_SCAIL2 model from REF_DIR."""
    import comfy.model_detection
    import comfy.supported_models as supported

    detect = comfy.model_detection.detect_unet_config

    def detect_scail(state_dict, key_prefix, metadata=None):
        cfg = detect(state_dict, key_prefix, metadata=metadata)
        if cfg is not None and cfg.get("image_model") == "wan2.1":
            if f"{key_prefix}patch_embedding_mask.weight" in state_dict:
                cfg["model_type"] = "scail2"
        return cfg

    comfy.model_detection.detect_unet_config = detect_scail

    class Scail2(supported.WAN21_T2V):
        unet_config = {"image_model": "wan2.1", "model_type": "scail2"}

        def get_model(self, state_dict, prefix="", device=None):
            return scail_model_ref.WAN21_SCAIL2(self, device=device)

    supported.models.insert(0, Scail2)


def record_workflow() -> dict:
    """workflows_json/wan_scail2.json node by node with ComfyUI's classes (0.10.0's, the newest source's
    WanSCAILToVideo): the frames of the VAEDecode that CreateVideo shows."""
    import comfy_extras.nodes_video as video
    import folder_paths

    import nodes

    folder_paths.set_input_directory(INPUT)
    for kind in ("diffusion_models", "text_encoders", "vae", "clip_vision", "loras"):
        folder_paths.add_model_folder_path(kind, f"{MODELS}/{kind}", is_default=True)
    wan.tiny_widths()
    scail_detection()
    classes = wan.node_classes()
    classes.update(
        LoadVideo=video.LoadVideo,
        GetVideoComponents=video.GetVideoComponents,
        ImageInvert=nodes.ImageInvert,
        WanSCAILToVideo=nodes_scail_ref.WanSCAILToVideo,
    )
    with open(WORKFLOW) as f:
        prompt = json.load(f)
    results: dict[str, tuple] = {}

    def value(v):
        return run(v[0])[v[1]] if isinstance(v, list) else v

    def run(node_id: str) -> tuple:
        if node_id not in results:
            node = prompt[node_id]
            kind, raw = node["class_type"], node["inputs"]
            if kind == "CLIPVisionLoader":
                results[node_id] = wan.load_clip_vision(value(raw["clip_name"]))
            else:
                results[node_id] = run_node(classes[kind], {k: value(v) for k, v in raw.items()})
        return results[node_id]

    (create,) = [v for v in prompt.values() if v["class_type"] == "CreateVideo"]
    decode = create["inputs"]["images"][0]
    return {"prompt": prompt, "frames": png_rgb(run(decode)[0])}


def main() -> None:
    path = f"{MODELS}/{FILE}"
    sd = {k: v.float() for k, v in comfy.utils.load_torch_file(path).items()}
    model = build_model(sd)
    inputs, cases = record_network(model, sd["text_embedding.0.weight"].shape[1], sd["img_emb.proj.0.weight"].shape[0])
    vae = comfy.sd.VAE(sd=comfy.utils.load_torch_file(f"{MODELS}/{VAE}"))
    digests = {}
    for name in (FILE, VAE):
        with open(f"{MODELS}/{name}", "rb") as f:
            digests[name] = hashlib.sha256(f.read()).hexdigest()
    write_json(
        OUT,
        {
            "source": "Comfy-Org/ComfyUI comfy/ldm/wan/model.py (56bf4365f7), comfy/model_base.py, "
            "comfy_extras/nodes_scail.py (de974be0f4) on ComfyUI 0.10.0's comfy package",
            "file": FILE,
            "sha256": digests,
            "inputs": inputs,
            "cases": cases,
            "extra_conds": record_extra_conds(),
            "nodes": record_nodes(vae),
            "colored_masks": record_colored_masks(),
            "workflow": record_workflow(),
        },
    )


if __name__ == "__main__":
    main()
