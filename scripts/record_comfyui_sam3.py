"""Record what today's ComfyUI's SAM 3.1 computes on the tiny demo checkpoint (nodes/models/sam3_demo.py:
checkpoints/sam3.1_multiplex_fp16_tiny.safetensors), for tests/models/test_sam3.py
(tests/models/fixtures/comfyui_sam3.json.xz).

No runnable ComfyUI has SAM 3 (0.10.0 predates it), so, as issues 38 and 39 ask, ComfyUI's own modules are run at
development time inside upstream 0.10.0's environment: from Comfy-Org/ComfyUI at a439dcae07d6 (2026-06-16), saved
outside this repository in a folder laid out as ComfyUI's tree: comfy/ldm/sam3/{sam,detector,tracker}.py (with an
empty __init__.py), comfy/text_encoders/sam3_clip.py, comfy_extras/nodes_sam3.py, and sam3_supported.py holding the
SAM3 class's two state-dict methods of comfy/supported_models.py (`import comfy.utils as utils` above them). 0.10.0's
comfy package is extended with that folder's modules; its optimized_attention is set to attention_pytorch (torch's
SDPA, what ComfyUI uses on GPUs). The tiny sizes are passed to ComfyUI's SAM3Model (sam3_demo.COMFY_KWARGS) and
SAM3_CLIP_CONFIG (which fix the released sizes); weights are loaded strictly, float32. Nothing of ComfyUI is
committed. Given that folder:

    PYTHONPATH=/tmp/c010/shim:/tmp/c010/src OMP_NUM_THREADS=2 /tmp/c010/venv/bin/python \\
        scripts/record_comfyui_sam3.py <folder> tests/models/fixtures/comfyui_sam3.json.xz

Recorded: the text encoder's conditioning and masks (one prompt, and `cat:2, dog`), the detector's raw outputs on
one image, SAM3_Detect's node outputs (text with refine 0 and 2, several prompts with individual masks, points,
boxes without text), and SAM3_VideoTrack's tracker (SAM3Model.forward_video) on a 3-frame clip: from text alone, and from a first-frame
mask with text finding more objects (packed masks and scores). And a SAM 3 (not 3.1) file of the demo builder
(sam3_demo.tiny_state_dict(multiplex=False)): conditioning, the detector's outputs, SAM3_Detect with text and points. Box prompts with text need torchvision's roi_align, which
0.10.0's CPU environment lacks."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from comfyui_recording import MAX_RECORDED_VALUES, b64, comfyui_on_cpu, sha256, write_json  # noqa: E402

IMAGE_SEED, H, W = 5, 60, 84
PROMPTS = {"single": "guitar", "multi": "cat:2, dog"}


def test_image() -> torch.Tensor:
    """A seeded [1, H, W, 3] image with a brighter rectangle (the test draws the same)."""
    gen = torch.Generator().manual_seed(IMAGE_SEED)
    img = torch.rand(1, H, W, 3, generator=gen) * 0.5
    img[:, 10:40, 20:60] += 0.4
    return img


CLIP_SEED, CLIP_FRAMES, CLIP_H, CLIP_W = 6, 3, 40, 56
SAM3_SEED = 3033  # the SAM 3 (not 3.1) file's


def test_clip() -> torch.Tensor:
    """A seeded [3, 40, 56, 3] clip: a bright rectangle moving right over noise (the test draws the same)."""
    gen = torch.Generator().manual_seed(CLIP_SEED)
    clip = torch.rand(CLIP_FRAMES, CLIP_H, CLIP_W, 3, generator=gen) * 0.4
    for i in range(CLIP_FRAMES):
        clip[i, 8:30, 10 + 3 * i : 40 + 3 * i] += 0.5
    return clip


def main() -> None:
    folder, out_path = Path(sys.argv[1]), sys.argv[2]
    comfyui_on_cpu()
    import comfy.ldm
    import comfy.ldm.modules.attention as attn
    import comfy.text_encoders

    attn.optimized_attention = attn.attention_pytorch
    comfy.ldm.__path__.append(str(folder / "comfy" / "ldm"))
    comfy.text_encoders.__path__.append(str(folder / "comfy" / "text_encoders"))
    import comfy_extras

    comfy_extras.__path__.append(str(folder / "comfy_extras"))
    sys.path.insert(0, str(folder))
    import comfy.model_management
    import comfy.ops
    import comfy.text_encoders.sam3_clip as sam3_clip
    from comfy.ldm.sam3.detector import SAM3Model
    from comfy_extras import nodes_sam3
    from safetensors.torch import load_file
    from sam3_supported import SAM3 as Sam3Config

    from nodes.models import sam3_demo

    with tempfile.TemporaryDirectory() as tmp:
        path = sam3_demo.build_demo_sam3(Path(tmp))[0]
        file_sd = load_file(str(path))
        digest = sha256(str(path))
    conv = Sam3Config()
    unet_sd = conv.process_unet_state_dict({k: v.float() for k, v in file_sd.items()})
    clip_sd = conv.process_clip_state_dict({})

    model = SAM3Model(
        device="cpu", dtype=torch.float32, operations=comfy.ops.disable_weight_init, **sam3_demo.COMFY_KWARGS
    )
    missing, unexpected = model.load_state_dict(unet_sd, strict=False)
    nonpersistent = [k for k in missing if k.endswith(("freqs_cis", "freqs_cis_window", "_rope"))]
    assert not unexpected and set(missing) == set(nonpersistent), (missing[:5], unexpected[:5])
    model.eval()

    sam3_clip.SAM3_CLIP_CONFIG.update(
        hidden_size=sam3_demo.TINY.embed_dim,
        intermediate_size=sam3_demo.TEXT_FF,
        num_attention_heads=sam3_demo.TEXT_HEADS,
        num_hidden_layers=sam3_demo.TEXT_LAYERS,
    )
    tokenizer = sam3_clip.SAM3TokenizerWrapper()
    clip = sam3_clip.SAM3ClipModelWrapper(dtype=torch.float32)
    clip_missing, clip_unexpected = clip.load_state_dict(clip_sd, strict=False)
    assert not clip_unexpected and all(
        k.endswith(("position_ids", "logit_scale", "text_projection.weight")) for k in clip_missing
    ), clip_missing

    record: dict = {"sha256": digest, "image": {"seed": IMAGE_SEED, "height": H, "width": W}, "text": {}, "detect": {}}
    conds = {}
    for name, text in PROMPTS.items():
        with torch.no_grad():
            cond, _pooled, extra = clip.encode_token_weights(tokenizer.tokenize_with_weights(text))
        entry = {"text": text, "cond": b64(cond), "attention_mask": b64(extra["attention_mask"].float())}
        if "sam3_multi_cond" in extra:
            entry["multi"] = [
                {
                    "cond": b64(m["cond"]),
                    "attention_mask": b64(m["attention_mask"].float()),
                    "max_detections": m["max_detections"],
                }
                for m in extra["sam3_multi_cond"]
            ]
        record["text"][name] = entry
        conds[name] = [[cond, extra]]

    image = test_image()

    class Patcher:  # what SAM3_Detect reads of a ModelPatcher
        class model:  # noqa: N801
            diffusion_model = model

            @staticmethod
            def get_dtype():
                return torch.float32

    comfy.model_management.load_model_gpu = lambda m: None
    frame = comfy.utils.common_upscale(image.movedim(-1, 1), 1008, 1008, "bilinear", crop="disabled")
    with torch.no_grad():
        cond, extra = conds["single"][0]
        raw = model(frame, text_embeddings=cond, text_mask=extra["attention_mask"], threshold=0.5, orig_size=(H, W))
    record["raw"] = {
        "boxes": b64(raw["boxes"]),
        "scores": b64(raw["scores"]),
        "presence": b64(raw["presence"]),
        "masks": b64(raw["masks"], MAX_RECORDED_VALUES),
    }

    cases = {
        "text_refine0": {"conditioning": conds["single"], "refine_iterations": 0},
        "text_refine2": {"conditioning": conds["single"], "refine_iterations": 2},
        "multi_individual": {"conditioning": conds["multi"], "refine_iterations": 1, "individual_masks": True},
        "points": {"positive_coords": '[{"x": 30, "y": 20}]', "negative_coords": '[{"x": 70, "y": 50}]'},
        "one_point": {"positive_coords": '[{"x": 40, "y": 25}]', "refine_iterations": 1},
        "boxes": {"bboxes": [{"x": 18, "y": 8, "width": 44, "height": 34}], "individual_masks": True},
    }
    for name, kwargs in cases.items():
        with torch.no_grad():
            out = nodes_sam3.SAM3_Detect.execute(model=Patcher, image=image, threshold=0.5, **kwargs)
        masks, boxes = out.result
        record["detect"][name] = {
            "kwargs": {k: v for k, v in kwargs.items() if k != "conditioning"},
            "prompt": next((p for p, c in conds.items() if c is kwargs.get("conditioning")), None),
            "masks": b64(masks),
            "bboxes": boxes,
        }
        print(name, tuple(masks.shape), float(masks.sum()), boxes)
    frames = test_clip()
    init = torch.zeros(1, CLIP_H, CLIP_W)
    init[:, 8:30, 10:40] = 1.0
    record["video"] = {}
    videos = {
        "text": {"text_prompts": [(conds["single"][0][0], conds["single"][0][1]["attention_mask"])]},
        "mask_and_text": {
            "initial_masks": init.unsqueeze(1),
            "text_prompts": [(conds["single"][0][0], conds["single"][0][1]["attention_mask"])],
            "max_objects": 3,
        },
    }
    for name, kwargs in videos.items():
        args = {
            "initial_masks": None,
            "text_prompts": None,
            "new_det_thresh": 0.5,
            "max_objects": 4,
            "detect_interval": 1,
        }
        args.update(kwargs)
        with torch.no_grad():
            out = model.forward_video(
                images=frames.movedim(-1, 1),
                pbar=None,
                target_device=torch.device("cpu"),
                target_dtype=torch.float32,
                **args,
            )
        packed = out["packed_masks"]
        record["video"][name] = {
            "max_objects": args["max_objects"],
            "packed": None if packed is None else {"shape": list(packed.shape), "u8": packed.flatten().tolist()},
            "scores": out["scores"],
            "n_frames": out["n_frames"],
        }
        print(name, None if packed is None else tuple(packed.shape), out["scores"])
    record["sam3"] = record_sam3(image, conv_cls=Sam3Config, clip_module=sam3_clip, nodes_sam3=nodes_sam3)
    print("wrote", write_json(out_path, record))


def record_sam3(image: torch.Tensor, conv_cls, clip_module, nodes_sam3) -> dict:
    """SAM 3 (not 3.1): the demo builder's non-multiplex file (its detector, necks and SAM decoder; without the memory
    tracker's weights, which ComfyUI's SAM3Model then leaves as built and SAM3_Detect never reads): the text
    conditioning, the detector's raw outputs and SAM3_Detect with text (refined twice) and with points."""
    import comfy.ops
    import comfy.utils
    from comfy.ldm.sam3.detector import SAM3Model

    from nodes.models import sam3_demo

    conv = conv_cls()
    unet_sd = conv.process_unet_state_dict(
        {k: v.float() for k, v in sam3_demo.tiny_state_dict(SAM3_SEED, False).items()}
    )
    clip_sd = conv.process_clip_state_dict({})
    kwargs = {**sam3_demo.COMFY_KWARGS, "image_model": "SAM3"}
    model = SAM3Model(device="cpu", dtype=torch.float32, operations=comfy.ops.disable_weight_init, **kwargs)
    missing, unexpected = model.load_state_dict(unet_sd, strict=False)
    used = ("tracker.sam_mask_decoder.", "tracker.sam_prompt_encoder.", "tracker.no_mem_embed")
    assert not unexpected and not [k for k in missing if k.startswith(used) or k.startswith("detector.")], missing
    model.eval()
    tokenizer = clip_module.SAM3TokenizerWrapper()
    clip = clip_module.SAM3ClipModelWrapper(dtype=torch.float32)
    clip.load_state_dict(clip_sd, strict=False)
    with torch.no_grad():
        cond, _pooled, extra = clip.encode_token_weights(tokenizer.tokenize_with_weights(PROMPTS["single"]))
    h, w = image.shape[1:3]
    frame = comfy.utils.common_upscale(image.movedim(-1, 1), 1008, 1008, "bilinear", crop="disabled")
    with torch.no_grad():
        raw = model(frame, text_embeddings=cond, text_mask=extra["attention_mask"], orig_size=(h, w))

    class Patcher:
        class model:  # noqa: N801
            diffusion_model = model

            @staticmethod
            def get_dtype():
                return torch.float32

    out = {
        "seed": SAM3_SEED,
        "cond": b64(cond),
        "raw": {k: b64(raw[k], MAX_RECORDED_VALUES) for k in ("boxes", "scores", "presence", "masks")},
        "detect": {},
    }
    cases = {
        "text_refine2": {"conditioning": [[cond, extra]], "refine_iterations": 2},
        "points": {"positive_coords": '[{"x": 30, "y": 20}]', "negative_coords": '[{"x": 70, "y": 50}]'},
    }
    for name, kw in cases.items():
        with torch.no_grad():
            masks, boxes = nodes_sam3.SAM3_Detect.execute(model=Patcher, image=image, threshold=0.5, **kw).result
        out["detect"][name] = {"masks": b64(masks), "bboxes": boxes}
        print("sam3", name, tuple(masks.shape), float(masks.sum()), boxes)
    return out


if __name__ == "__main__":
    main()
