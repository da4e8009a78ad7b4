"""SAM 3.1's video tracking (SAM3_VideoTrack): objects given as first-frame masks and/or found by text prompts are
followed through the frames with the multiplex memory tracker (nodes/models/sam3_tracker.py), new ones joining as
the detector finds them.

Facts (the order of operations, thresholds, sizes) read from Comfy-Org/ComfyUI's comfy/ldm/sam3/tracker.py
(SAM31Tracker.track_video_with_detection and what it calls) and detector.py (SAM3Model.forward_video) at upstream commit
a439dcae07d6 (2026-06-16); the code is our own. Per frame: the frame is resized bicubic to 1008; the detector runs
(every `detect_interval` frames, while fewer than `max_objects` are tracked), keeping sigmoid scores above the
threshold after a mask NMS (max of IoU and intersection over the smaller area, 0.5); the first frame with masks (given,
or the first detections) conditions the tracker with them (the interactive heads turn each mask into an object
pointer; its memory is encoded with the conditioning flag set); later frames are propagated: the frame's features
attend to up to 7 memory frames and 16 frames' object pointers, the multiplex decoder predicts every object at once,
small holes and specks (16 cells or less; 4-connected, ComfyUI's scipy path) are fixed, overlapping recently occluded
objects suppressed, the memory re-encoded with each pixel kept by its strongest object, detections matched (overlap
0.5) to refresh confident (0.8) tracks or to add objects, and objects unmatched for long (ComfyUI's keep-alive count)
blanked. Masks come out bit-packed at 1008x1008."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from scipy import ndimage
from torch import nn

from .sam3 import IMAGE_SIZE, NO_OBJECT_LOGIT, Detector, Sam3Config, Sam3Model, sine_features
from .sam3_tracker import NUM_MASKMEM, VideoTracker

MAX_OBJECT_POINTERS = 16
INTERNAL_MAX_OBJECTS = 64
MEMORY_SCALE, MEMORY_BIAS = 2.0, -1.0  # sigmoid(mask) * 2 - 1 for the memory encoder
HOLE_AREA = 16


class Sam3VideoModel(Sam3Model):
    """The detector and the whole SAM 3.1 tracker."""

    def __init__(self, cfg: Sam3Config, mlp_dim: int, multiplex: int) -> None:
        nn.Module.__init__(self)
        self.cfg = cfg
        self.detector = Detector(cfg)
        self.tracker = VideoTracker(cfg, multiplex, mlp_dim)


# ---- helpers ------------------------------------------------------------------------------------------------


def overlap(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """[Na, Nb]: the larger of IoU and intersection over the smaller area, of masks' positive cells."""
    af, bf = (a > 0).float().flatten(1), (b > 0).float().flatten(1)
    inter = af @ bf.T
    area_a, area_b = af.sum(1, keepdim=True), bf.sum(1, keepdim=True).T
    iou = inter / (area_a + area_b - inter).clamp(min=1)
    iom = inter / torch.min(area_a.expand_as(iou), area_b.expand_as(iou)).clamp(min=1)
    return torch.max(iou, iom)


def nms(masks: torch.Tensor, scores: torch.Tensor, thresh: float = 0.5) -> tuple[torch.Tensor, torch.Tensor]:
    order = scores.argsort(descending=True)
    masks, scores = masks[order], scores[order]
    keep: list[int] = []
    for i in range(masks.shape[0]):
        if keep and overlap(masks[i : i + 1], masks[torch.tensor(keep)]).max() >= thresh:
            continue
        keep.append(i)
    return masks[keep], scores[keep]


def _areas(binary: torch.Tensor) -> torch.Tensor:
    """Each cell's 4-connected component size (0 off the mask), per item of [N, 1, H, W]."""
    out = []
    for m in binary[:, 0].numpy():
        labels, _ = ndimage.label(m)
        sizes = torch.from_numpy(np.bincount(labels.ravel())).to(torch.int64)
        sizes[0] = 0
        out.append(sizes[torch.from_numpy(labels)])
    return torch.stack(out).unsqueeze(1)


def fill_holes(mask: torch.Tensor, max_area: int = HOLE_AREA) -> torch.Tensor:
    """Small background holes become 0.1, then small foreground specks (at most half the foreground) -0.1."""
    bg = mask <= 0
    mask = torch.where(bg & (_areas(bg.to(torch.uint8)) <= max_area), torch.tensor(0.1, dtype=mask.dtype), mask)
    fg = mask > 0
    limit = (fg.sum(dim=(2, 3), keepdim=True) // 2).clamp(max=max_area)
    return torch.where(fg & (_areas(fg.to(torch.uint8)) <= limit), torch.tensor(-0.1, dtype=mask.dtype), mask)


def pack_masks(masks: torch.Tensor) -> torch.Tensor:
    """[..., H, W] logits -> [..., H, W/8] uint8, bit i of a byte the cell 8k+i being positive."""
    bits = (masks > 0).view(*masks.shape[:-1], -1, 8).to(torch.uint8)
    return (bits << torch.arange(8, dtype=torch.uint8)).sum(-1, dtype=torch.uint8)


def unpack_masks(packed: torch.Tensor) -> torch.Tensor:
    bits = torch.tensor([1, 2, 4, 8, 16, 32, 64, 128], dtype=torch.uint8)
    return (packed.unsqueeze(-1) & bits).bool().view(*packed.shape[:-1], -1)


class Slots:
    """Objects in multiplex slots: object i sits in slot i of buckets of M; mux pads, demux drops the empty slots."""

    def __init__(self, objects: int, multiplex: int) -> None:
        self.m = multiplex
        self.n = objects

    @property
    def buckets(self) -> int:
        return -(-self.n // self.m)

    def mux(self, x: torch.Tensor) -> torch.Tensor:
        pad = self.buckets * self.m - self.n
        x = torch.cat([x, x.new_zeros(pad, *x.shape[1:])]) if pad else x
        return x.view(self.buckets, self.m, *x.shape[1:])

    def demux(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(self.buckets * self.m, *x.shape[2:])[: self.n]

    def valid(self) -> torch.Tensor:
        return (torch.arange(self.buckets * self.m) < self.n).view(self.buckets, self.m)


def _pad_buckets(t: torch.Tensor, buckets: int) -> torch.Tensor:
    if t.shape[0] >= buckets:
        return t
    return torch.cat([t, t.new_zeros(buckets - t.shape[0], *t.shape[1:])])


def _spatial(x: torch.Tensor, h: int, w: int) -> torch.Tensor:
    return x.view(x.shape[0], h, w, -1).permute(0, 3, 1, 2)


# ---- the tracker --------------------------------------------------------------------------------------------


class VideoRun:
    """One SAM3_VideoTrack run over [N, 3, H, W] frames (0..1)."""

    def __init__(self, model: Sam3VideoModel, prompts, threshold: float, max_objects: int, interval: int) -> None:
        self.model = model
        self.tracker: VideoTracker = model.tracker
        self.prompts = prompts
        self.threshold = threshold
        self.max_objects = (
            INTERNAL_MAX_OBJECTS if max_objects <= 0 or max_objects > INTERNAL_MAX_OBJECTS else max_objects
        )
        self.interval = max(interval, 1)
        self.cond: dict[int, dict] = {}
        self.recent: dict[int, dict] = {}
        self.slots: Slots | None = None
        self.frames = 0

    # -- one frame's features
    def backbone(self, frame: torch.Tensor):
        trunk = self.model.trunk(frame)
        feats, pos = self.model.vision.levels(trunk, "propagation_convs")
        return {
            "trunk": trunk,
            "x": feats[-1].flatten(2).permute(0, 2, 1),
            "pos": pos[-1].flatten(2).permute(0, 2, 1),
            "size": feats[-1].shape[-2:],
            "high": feats[:-1],
        }

    def detect(self, trunk: torch.Tensor):
        scores, masks = [], []
        for text, mask in self.prompts:
            det = self.model.detector.detect(trunk, text, mask)
            scores.append(det.scores)
            masks.append(det.masks)
        probs = torch.cat(scores, dim=1)[0].sigmoid()
        keep = probs > self.threshold
        masks_k, probs_k = torch.cat(masks, dim=1)[0][keep], probs[keep]
        if masks_k.shape[0] > 1:
            masks_k, probs_k = nms(masks_k, probs_k)
        return masks_k, probs_k

    # -- memory
    def encode_memory(self, bb, masks_high: torch.Tensor, obj_logits: torch.Tensor, conditioning) -> tuple:
        t = self.tracker
        mem = torch.sigmoid(masks_high) * MEMORY_SCALE + MEMORY_BIAS
        n = mem.shape[0]
        flags = torch.zeros(n, dtype=mem.dtype)
        if conditioning is True:
            flags[:] = 1.0
        elif conditioning is not None:
            flags[conditioning] = 1.0
        flags = flags.view(-1, 1, 1).expand(n, *mem.shape[-2:])
        inputs = torch.cat([self.slots.mux(mem[:, 0]), self.slots.mux(flags)], dim=1)
        h, w = bb["size"]
        feats, pos = t.maskmem_backbone(_spatial(bb["x"], h, w), inputs)
        is_obj = self.slots.mux((obj_logits > 0).float())[..., None, None]  # [B, M, 1, 1, 1]
        no_obj = ((1 - is_obj) * t.no_obj_embed_spatial[None, :, :, None, None]).sum(dim=1)
        return feats + no_obj.expand_as(feats), pos

    def deferred_memory(self, out: dict, bb, conditioning=None) -> None:
        low = out["pred_masks"]
        n = low.shape[0]
        if n > 1:
            lr = low[:, 0]
            strongest = lr.argmax(dim=0, keepdim=True)
            own = torch.where(strongest == torch.arange(n)[:, None, None], lr, lr.clamp(max=-10.0))
            before = (lr > 0).sum(dim=(-1, -2)).float().clamp(min=1)
            after = (own > 0).sum(dim=(-1, -2)).float()
            ok = (after / before) >= 0.3
            low = torch.where(ok[:, None, None, None].expand_as(low), low, low.clamp(max=-10.0))
        mem = F.interpolate(low, size=(1152, 1152), mode="bilinear", align_corners=False)
        logits = torch.where((mem > 0).any(dim=(-1, -2)), 10.0, -10.0)
        out["mem"] = self.encode_memory(bb, mem, logits, conditioning)

    def memory_features(self, idx: int, bb) -> torch.Tensor:
        t = self.tracker
        buckets = self.slots.buckets
        mem, mem_pos, img, img_pos = [], [], [], []

        def add(out: dict, tpos: int) -> None:
            feats, pos = out["mem"]
            mem.append(_pad_buckets(feats, buckets).flatten(2).permute(0, 2, 1))
            enc = _pad_buckets(pos.flatten(2).permute(0, 2, 1), buckets)
            tp = t.maskmem_tpos_enc[tpos]
            mem_pos.append(enc + tp)
            img.append(out["image"])
            img_pos.append(out["image_pos"] + tp)

        for frame, out in self.cond.items():
            d = idx - frame
            add(out, NUM_MASKMEM - d - 1 if 0 < d < NUM_MASKMEM else NUM_MASKMEM - 1)
        for tpos in range(1, NUM_MASKMEM):
            out = self.recent.get(idx - (NUM_MASKMEM - tpos))
            if out is not None and out.get("mem") is not None:
                add(out, NUM_MASKMEM - tpos - 1)
        most = min(self.frames, MAX_OBJECT_POINTERS)
        ptrs = [(idx - f, out["obj_ptr"]) for f, out in self.cond.items() if f <= idx]
        for back in range(1, most):
            if idx - back < 0:
                break
            out = self.recent.get(idx - back)
            if out is not None:
                ptrs.append((back, out["obj_ptr"]))
        n_ptr = 0
        if ptrs:
            stacked = torch.stack([_pad_buckets(p, buckets) for _, p in ptrs], dim=1)  # [B, P, M, C]
            b, p, m, c = stacked.shape
            rel = torch.tensor([r for r, _ in ptrs], dtype=torch.float32) / max(most - 1, 1)
            half = c // 2
            dim_t = 10000 ** (2 * (torch.arange(half, dtype=torch.float32) // 2) / half)
            pe = torch.cat([(rel[:, None] / dim_t).sin(), (rel[:, None] / dim_t).cos()], dim=-1)
            pos = t.obj_ptr_tpos_proj(pe)[None, :, None].expand(b, -1, m, -1).reshape(b, p * m, -1)
            mem.append(stacked.reshape(b, p * m, c))
            mem_pos.append(pos)
            n_ptr = p * m
        h, w = bb["size"]
        if not mem:
            return _spatial(bb["x"] + t.interactivity_no_mem_embed, h, w)
        memory, memory_pos = torch.cat(mem, dim=1), torch.cat(mem_pos, dim=1)
        b = memory.shape[0]
        x, x_pos = bb["x"].expand(b, -1, -1), bb["pos"].expand(b, -1, -1)
        mi, mip = torch.cat(img, dim=1).expand(b, -1, -1), torch.cat(img_pos, dim=1).expand(b, -1, -1)
        return _spatial(t.transformer.encoder(x, x_pos, memory, memory_pos, mi, mip, n_ptr), h, w)

    # -- steps
    def condition(self, masks: torch.Tensor, idx: int, bb, threshold: float) -> dict:
        t = self.tracker
        masks = masks if masks.dim() == 4 else masks.unsqueeze(1)
        mask_in = F.interpolate(masks, size=(IMAGE_SIZE, IMAGE_SIZE), mode="bilinear", align_corners=False) > threshold
        mask_in = mask_in.to(masks.dtype)
        feats, _ = self.model.vision.levels(bb["trunk"], "interactive_convs")
        image = feats[-1] + t.interactivity_no_mem_embed.view(1, -1, 1, 1)
        high = mask_in * 20.0 - 10.0
        low = F.interpolate(
            high, size=(IMAGE_SIZE // 14 * 4,) * 2, mode="bilinear", align_corners=False, antialias=True
        )
        ptr = self.interactive_pointer(image, feats[:-1], t.interactive_mask_downsample(mask_in))
        logits = 20.0 * torch.any(mask_in.flatten(1) > 0.0, dim=1)[..., None].to(ptr.dtype) - 10.0
        out = {"pred_masks": low, "pred_masks_high_res": high, "obj_ptr": self.slots.mux(ptr), "obj_logits": logits}
        out["mem"] = self.encode_memory(bb, high, logits, True)
        out["image"], out["image_pos"] = bb["x"], bb["pos"]
        self.cond[idx] = out
        return out

    def interactive_pointer(self, image, high_res, mask_prompt) -> torch.Tensor:
        """The object pointer SAM's interactive heads give for a mask prompt (ComfyUI's forward_sam_heads)."""
        t = self.tracker
        decoder, prompts, _ = t.parts()
        b = mask_prompt.shape[0]
        side = prompts.grid * 4
        if tuple(mask_prompt.shape[-2:]) != (side, side):
            mask_prompt = F.interpolate(
                mask_prompt, size=(side, side), mode="bilinear", align_corners=False, antialias=True
            )
        coords, labels = torch.zeros(b, 1, 2), -torch.ones(b, 1, dtype=torch.int32)
        sparse, dense = prompts(coords, labels, None, mask_prompt, image.dtype)
        image_pe = prompts.pe_layer.grid(prompts.grid, prompts.grid)
        tokens_out = decoder.tokens(image, image_pe, sparse, dense)
        obj = decoder.pred_obj_score_head(tokens_out[:, 0])
        ptr = t.interactive_obj_ptr_proj(tokens_out[:, 2])
        return torch.lerp(t.no_obj_ptr_linear(ptr), ptr, (obj > 0).to(ptr.dtype))

    def propagate(self, idx: int, bb) -> dict:
        t = self.tracker
        image = self.memory_features(idx, bb)
        valid = self.slots.valid().unsqueeze(-1).float()
        extra = valid * t.output_valid_embed[None] + (1 - valid) * t.output_invalid_embed[None]
        image_pe = t.image_pe_layer.grid(image.shape[-2], image.shape[-1])
        masks, iou, tokens, obj = t.sam_mask_decoder(image, image_pe, bb["high"], extra.expand(image.shape[0], -1, -1))
        masks, iou, obj, tokens = (self.slots.demux(v) for v in (masks, iou, obj, tokens))
        best = iou.argmax(dim=-1)
        low = masks[torch.arange(masks.shape[0]), best].unsqueeze(1)
        low = torch.where((obj > 0)[:, :, None, None], low, torch.tensor(NO_OBJECT_LOGIT, dtype=low.dtype))
        high = F.interpolate(low.float(), size=(IMAGE_SIZE, IMAGE_SIZE), mode="bilinear", align_corners=False)
        ptr = t.obj_ptr_proj(tokens)
        is_obj = (obj > 0).float()
        ptr = is_obj * ptr + (1 - is_obj) * t.no_obj_ptr_linear(ptr)
        return {"pred_masks": low, "pred_masks_high_res": high, "obj_ptr": self.slots.mux(ptr), "obj_logits": obj,
                "mem": None, "image": bb["x"], "image_pos": bb["pos"]}  # fmt: skip

    def suppress_occluded(self, low: torch.Tensor, last: torch.Tensor, idx: int) -> None:
        n = low.shape[0]
        if n <= 1:
            return
        binary = low[:, 0] > 0
        over = torch.triu(overlap(low[:, 0], low[:, 0]) >= 0.3, diagonal=1)
        li, lj = last.unsqueeze(1), last.unsqueeze(0)
        sup_i = over & (li > lj) & (lj > -1)
        sup_j = over & (lj > li) & (li > -1)
        suppress = sup_i.any(dim=1) | sup_j.any(dim=0)
        last[~binary.any(dim=(-1, -2)) | suppress] = idx
        low[suppress] = -10.0

    def add_objects(self, new: torch.Tensor, out: dict, bb) -> None:
        old = self.slots.n
        self.slots = Slots(old + new.shape[0], self.slots.m)
        for k in ("pred_masks", "pred_masks_high_res"):
            det = F.interpolate(new.unsqueeze(1), size=out[k].shape[-2:], mode="bilinear", align_corners=False)
            out[k] = torch.cat([out[k], det])
        flags = torch.zeros(self.slots.n, dtype=torch.bool)
        flags[old:] = True
        self.deferred_memory(out, bb, flags)

    def match(self, det_masks, det_scores, out, bb, alive: dict | None) -> list[float]:
        n = self.slots.n
        if det_masks.shape[0] == 0:
            if alive is not None:
                for i in range(n):
                    alive[i] = max(-4, alive.get(i, 0) - 1)
            return []
        trk = out["pred_masks"][:, 0]
        det_low = F.interpolate(det_masks.unsqueeze(1), size=trk.shape[-2:], mode="bilinear", align_corners=False)[:, 0]
        ov = overlap(det_low, trk)
        matched = set((ov >= 0.5).any(dim=0).nonzero(as_tuple=True)[0].tolist()) if ov.shape[1] else set()
        if alive is not None:
            for i in range(n):
                alive[i] = min(8, alive.get(i, 0) + 1) if i in matched else max(-4, alive.get(i, 0) - 1)
        refreshed = False
        if ov.shape[1]:
            for d in range(ov.shape[0]):
                if det_scores[d] < 0.8:
                    continue
                best = ov[d].argmax().item()
                if ov[d, best] >= 0.5:
                    out["pred_masks"][best] = det_low[d].unsqueeze(0)
                    size = out["pred_masks_high_res"].shape[-2:]
                    hr = F.interpolate(
                        det_masks[d : d + 1].unsqueeze(1), size=size, mode="bilinear", align_corners=False
                    )
                    out["pred_masks_high_res"][best] = hr[0]
                    refreshed = True
        if refreshed:
            self.deferred_memory(out, bb)
        if n >= self.max_objects:
            return []
        best_ov = ov.max(dim=1)[0] if ov.shape[1] else torch.zeros(ov.shape[0])
        new = best_ov < 0.5
        if not new.any():
            return []
        new = new & (torch.cumsum(new.int(), 0) <= self.max_objects - n)
        self.add_objects(det_masks[new], out, bb)
        if alive is not None:
            for i in range(n, self.slots.n):
                alive[i] = 1
        return det_scores[new].tolist()

    @torch.no_grad()
    def run(self, frames: torch.Tensor, initial: torch.Tensor | None, multiplex: int) -> dict:
        n_frames = frames.shape[0]
        self.frames = n_frames
        if initial is not None:
            self.slots = Slots(initial.shape[0], multiplex)
        scores: list[float] = []
        alive: dict | None = {} if self.prompts else None
        last = torch.empty(0, dtype=torch.long)
        packed: list[torch.Tensor | None] = []
        for idx in range(n_frames):
            frame = F.interpolate(
                frames[idx : idx + 1], size=(IMAGE_SIZE, IMAGE_SIZE), mode="bicubic", align_corners=False
            )
            bb = self.backbone(frame)
            det_masks, det_scores = torch.empty(0), None
            run_det = bool(self.prompts) and idx % self.interval == 0
            run_det = run_det and not (self.slots is not None and self.slots.n >= self.max_objects)
            if run_det:
                det_masks, det_scores = self.detect(bb["trunk"])
            if idx == 0 and initial is not None:
                out = self.condition(initial, idx, bb, 0.5)
                last = torch.full((self.slots.n,), -1, dtype=torch.long)
                scores = [1.0] * self.slots.n
                if alive is not None:
                    alive.update({i: 8 for i in range(self.slots.n)})
            elif self.slots is None or self.slots.n == 0:
                if det_masks.shape[0] == 0:
                    packed.append(None)
                    continue
                det_masks, det_scores = det_masks[: self.max_objects], det_scores[: self.max_objects]
                self.slots = Slots(det_masks.shape[0], multiplex)
                out = self.condition(det_masks, idx, bb, 0.0)
                last = torch.full((self.slots.n,), -1, dtype=torch.long)
                scores = det_scores[: self.slots.n].tolist()
                if alive is not None:
                    alive.update({i: 1 for i in range(self.slots.n)})
            else:
                n = self.slots.n
                out = self.propagate(idx, bb)
                out["pred_masks"] = fill_holes(out["pred_masks"])
                if last.shape[0] == n and n > 1:
                    self.suppress_occluded(out["pred_masks"], last, idx)
                self.deferred_memory(out, bb)
                self.recent[idx] = out
                for old in [f for f in self.recent if f < idx - max(NUM_MASKMEM, MAX_OBJECT_POINTERS)]:
                    del self.recent[old]
                new_scores = self.match(det_masks, det_scores, out, bb, alive if run_det else None)
                added = self.slots.n - n
                if added:
                    last = torch.cat([last, torch.full((added,), -1, dtype=torch.long)])
                    scores += new_scores
            masks = out["pred_masks_high_res"][:, 0]
            if alive is not None:
                for i in range(masks.shape[0]):
                    if alive.get(i, 0) <= 0:
                        masks[i] = NO_OBJECT_LOGIT
            packed.append(pack_masks(masks) if self.slots.n else None)
        if all(p is None for p in packed):
            return {"packed_masks": None, "n_frames": n_frames, "scores": []}
        most = max(p.shape[0] for p in packed if p is not None)
        shape = next(p for p in packed if p is not None).shape[1:]
        full = [
            torch.cat([p, p.new_zeros(most - p.shape[0], *shape)])
            if p is not None
            else torch.zeros(most, *shape, dtype=torch.uint8)
            for p in packed
        ]
        return {"packed_masks": torch.stack(full), "n_frames": n_frames, "scores": scores}


def load_sam3_video(sd_file: dict[str, torch.Tensor], path: str | None) -> Sam3VideoModel:
    """The detector and the whole SAM 3.1 tracker from a released-layout file (float32)."""
    from .safetensors_io import build_module
    from .sam3 import TRUNK_HEADS, WINDOW, axial_rope, config_from_state_dict, file_to_runtime, tracker_mlp_dim

    sd = file_to_runtime(sd_file)
    cfg = config_from_state_dict(sd)
    if not cfg.multiplex:
        raise ValueError("SAM3_VideoTrack runs SAM 3.1 (multiplex) checkpoints; this is a SAM 3 one")
    mlp_dim = tracker_mlp_dim(sd)
    multiplex = sd["tracker.sam_mask_decoder.obj_score_token.weight"].shape[0]
    model = build_module(lambda: Sam3VideoModel(cfg, mlp_dim, multiplex), sd, path, "SAM 3.1 model")
    trunk = model.vision.trunk
    head_dim = cfg.embed_dim // TRUNK_HEADS
    trunk._rope_global = axial_rope(cfg.grid, head_dim, scale=cfg.pretrain_grid / cfg.grid)
    trunk._rope_window = axial_rope(WINDOW, head_dim)
    return model


__all__ = ["Sam3VideoModel", "VideoRun", "load_sam3_video", "pack_masks", "unpack_masks", "sine_features"]
