"""SAM3_Detect's work as one ModelFn: images and text prompts in, masks and boxes out, on the executor that holds
the SAM 3 weights (nodes/models/sam3.py).

Per image, as today's ComfyUI's comfy_extras/nodes_sam3.py (Comfy-Org/ComfyUI a439dcae07d6) does it: the image is
resized (bilinear) to 1008x1008; point prompts and box prompts without text go through SAM's decoder, fed back its
own mask logits `refine_iterations - 1` more times; each text prompt runs the detector (with the boxes, when given),
keeps the queries whose sigmoid score passes the threshold, best first, at most the prompt's detection count, and
refines each kept mask by running SAM's decoder on a crop around its box (10% margin, resized to 1008) from the coarse
mask `refine_iterations` times, the result ORed with the coarse mask. Masks are thresholded at logit 0."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from cluster.call import Params
from cluster.modelfn import ModelFn, register
from cluster.refs import ModelRef
from nodes.models.sam3 import IMAGE_SIZE, Sam3Model

PAD = 0.1


class Sam3DetectParams(Params):
    threshold: float = 0.5
    refine_iterations: int = 2
    individual_masks: bool = False
    max_detections: list[int] = []  # per text prompt (inputs text.<i> / mask.<i>)
    boxes: list[list[list[float]]] | None = None  # per image: boxes as normalised cx, cy, w, h (None: no boxes)
    points: list[list[float]] = []  # [x, y, label] in the image's pixels (label 1 positive, 0 negative)


def resize(images: torch.Tensor, size: int = IMAGE_SIZE) -> torch.Tensor:
    """IMAGE [B, H, W, C] -> [B, 3, size, size], as ComfyUI's common_upscale bilinear without crop."""
    return F.interpolate(images[..., :3].movedim(-1, 1), size=(size, size), mode="bilinear")


def _up(logits: torch.Tensor, h: int, w: int) -> torch.Tensor:
    return F.interpolate(logits, size=(h, w), mode="bilinear", align_corners=False)


def refine(model: Sam3Model, image_hwc: torch.Tensor, coarse: torch.Tensor, box: list[float], iterations: int):
    """A detector mask (logits at the image's size) refined on a crop around its box: [1, H, W] 0/1."""
    h, w = image_hwc.shape[:2]
    fallback = (_up(coarse[None, None], h, w)[0] > 0).float()
    if iterations <= 0:
        return fallback
    x1, y1, x2, y2 = box
    bw, bh = x2 - x1, y2 - y1
    cx1, cy1 = max(0, int(x1 - bw * PAD)), max(0, int(y1 - bh * PAD))
    cx2, cy2 = min(w, int(x2 + bw * PAD)), min(h, int(y2 + bh * PAD))
    if cx2 <= cx1 or cy2 <= cy1:
        return fallback
    mh, mw = coarse.shape[-2:]
    mx1, my1, mx2, my2 = int(cx1 / w * mw), int(cy1 / h * mh), int(cx2 / w * mw), int(cy2 / h * mh)
    if mx2 <= mx1 or my2 <= my1:
        return fallback
    trunk = model.trunk(resize(image_hwc[cy1:cy2, cx1:cx2][None]))
    logits = coarse[..., my1:my2, mx1:mx2][None, None]
    for _ in range(iterations):
        logits = model.segment(trunk, mask_logits=_up(logits, IMAGE_SIZE, IMAGE_SIZE))
    full = torch.zeros(1, 1, h, w, dtype=logits.dtype)
    full[:, :, cy1:cy2, cx1:cx2] = _up(logits, cy2 - cy1, cx2 - cx1)
    return ((full[0] > 0) | (_up(coarse[None, None], h, w)[0] > 0)).float()


def detect_image(
    model: Sam3Model,
    image: torch.Tensor,
    prompts: list[tuple[torch.Tensor, torch.Tensor, int]],
    boxes: torch.Tensor | None,
    points: list[list[float]],
    p: Sam3DetectParams,
) -> tuple[list[torch.Tensor], list[list[float]]]:
    """One image [H, W, C]: its masks ([n, H, W] each) and boxes [x, y, width, height, score]."""
    h, w = image.shape[:2]
    trunk = model.trunk(resize(image[None]))
    masks: list[torch.Tensor] = []
    found: list[list[float]] = []

    def sam(**prompt) -> None:
        logits = model.segment(trunk, **prompt)
        for _ in range(max(0, p.refine_iterations - 1)):
            logits = model.segment(trunk, mask_logits=logits)
        masks.append((_up(logits, h, w)[0] > 0).float())

    if points:
        coords = torch.tensor([[[x / w * IMAGE_SIZE, y / h * IMAGE_SIZE] for x, y, _ in points]])
        labels = torch.tensor([[int(label) for _, _, label in points]], dtype=torch.int32)
        sam(points=(coords, labels))
    if boxes is not None and not prompts:
        for cx, cy, bw, bh in boxes.tolist():
            corners = [
                [(cx - bw / 2) * IMAGE_SIZE, (cy - bh / 2) * IMAGE_SIZE],
                [(cx + bw / 2) * IMAGE_SIZE, (cy + bh / 2) * IMAGE_SIZE],
            ]
            sam(boxes=torch.tensor([corners]))
    for text, text_mask, most in prompts:
        det = model.detector.detect(
            trunk, text, text_mask, boxes=None if boxes is None else boxes[None], orig_size=(h, w)
        )
        probs = det.scores[0].sigmoid()
        keep = probs > p.threshold
        kept_boxes, kept_probs, kept_masks = det.boxes[0][keep], probs[keep], det.masks[0][keep]
        order = kept_probs.argsort(descending=True)[:most]
        for box, prob, mask in zip(kept_boxes[order], kept_probs[order], kept_masks[order]):
            found.append([*box[:2].tolist(), *(box[2:] - box[:2]).tolist(), float(prob)])
            masks.append(refine(model, image, mask, box.tolist(), p.refine_iterations))
    return masks, found


@register
class Sam3Detect(ModelFn):
    """inputs: image [B,H,W,C]; text.<i> [1,T,D] and mask.<i> [1,T] per text prompt. outputs: masks ([B,H,W],
    or [N,H,W] with individual_masks) and boxes [N, 6] (image index, x, y, width, height, score)."""

    name = "sam3_detect"
    Params = Sam3DetectParams

    def setup_io(self) -> None:
        self.add_input("image")
        self.add_output("masks")
        self.add_output("boxes")

    def load_model(self, ref: ModelRef) -> Sam3Model:
        from nodes.models.safetensors_io import load_state_dict
        from nodes.models.sam3 import load_sam3

        return load_sam3(load_state_dict(ref.sources[0], ref.digests[0]), ref.sources[0])

    @torch.no_grad()
    def execute(self, model: Sam3Model, inputs: dict[str, Any], params: Sam3DetectParams) -> dict[str, torch.Tensor]:
        images = inputs["image"].float()
        b, h, w = images.shape[:3]
        prompts = [
            (self.resolve(inputs, f"text.{i}").float(), self.resolve(inputs, f"mask.{i}"), n)
            for i, n in enumerate(params.max_detections)
        ]
        per_image, boxes_out = [], []
        for i in range(b):
            frame_boxes = params.boxes[min(i, len(params.boxes) - 1)] if params.boxes else None
            boxes = torch.tensor(frame_boxes, dtype=torch.float32) if frame_boxes else None
            masks, found = detect_image(model, images[i], prompts, boxes, params.points, params)
            boxes_out += [[float(i), *f] for f in found]
            if params.individual_masks:
                per_image.append(torch.cat(masks) if masks else torch.zeros(0, h, w))
            else:
                per_image.append(torch.cat(masks).amax(dim=0) if masks else torch.zeros(h, w))
        out = torch.cat(per_image) if params.individual_masks else torch.stack(per_image)
        return {"masks": out, "boxes": torch.tensor(boxes_out, dtype=torch.float32).reshape(-1, 6)}


class Sam3TrackParams(Params):
    detection_threshold: float = 0.5
    max_objects: int = 0
    detect_interval: int = 1
    prompts: int = 0  # text prompts given as inputs text.<i> / mask.<i>


@register
class Sam3Track(ModelFn):
    """SAM3_VideoTrack's tracking (nodes/models/sam3_video.py): inputs images [N,H,W,C], optional initial_mask
    [K,H,W], text.<i> / mask.<i>; outputs packed ([N, objects, 1008, 126] uint8, bit-packed mask rows; absent when
    nothing was tracked) and scores [objects]."""

    name = "sam3_track"
    Params = Sam3TrackParams

    def setup_io(self) -> None:
        self.add_input("images")
        self.add_output("packed")
        self.add_output("scores")

    def load_model(self, ref: ModelRef):
        from nodes.models.safetensors_io import load_state_dict
        from nodes.models.sam3_video import load_sam3_video

        return load_sam3_video(load_state_dict(ref.sources[0], ref.digests[0]), ref.sources[0])

    @torch.no_grad()
    def execute(self, model, inputs: dict[str, Any], params: Sam3TrackParams) -> dict[str, torch.Tensor]:
        from nodes.models.sam3_video import VideoRun

        frames = inputs["images"].float()[..., :3].movedim(-1, 1)
        initial = self.resolve(inputs, "initial_mask")
        prompts = [
            (self.resolve(inputs, f"text.{i}").float(), self.resolve(inputs, f"mask.{i}"))
            for i in range(params.prompts)
        ]
        run = VideoRun(model, prompts, params.detection_threshold, params.max_objects, params.detect_interval)
        multiplex = model.tracker.multiplex
        out = run.run(frames, None if initial is None else initial.float().unsqueeze(1), multiplex)
        result = {"scores": torch.tensor(out["scores"], dtype=torch.float32)}
        if out["packed_masks"] is not None:
            result["packed"] = out["packed_masks"]
        return result
