"""Record what today's ComfyUI's SeedVR2 image and latent nodes compute, for tests/nodes/test_seedvr2_nodes.py
(tests/nodes/fixtures/comfyui_seedvr2_nodes.json.xz).

No runnable ComfyUI has SeedVR2 (0.10.0 predates it), so, as issues 38 and 39 ask, ComfyUI's own code is run at
development time: the node bodies of comfy_extras/nodes_seedvr.py (SeedVR2Preprocess, SeedVR2PostProcessing,
SeedVR2TemporalChunk, SeedVR2TemporalMerge) and comfy/ldm/seedvr/color_fix.py (lab, wavelet and AdaIN colour
transfer) of the newest Comfy-Org/ComfyUI source (read 2026-12-05), saved outside this repository as one module
`nodes_seedvr_ref` in a folder, with stand-ins for what they import: io.NodeOutput as plain return values,
comfy.model_management's colour device as the CPU and its free memory as unlimited (so colour correction runs as one
chunk; every method works frame by frame, so chunking changes no number), the fp16-safe pad/interpolate helpers as
F.pad / F.interpolate (their float32 path), torchvision's tensor resize (bicubic, antialias) as the F.interpolate call
it makes for float tensors. Nothing of ComfyUI is committed. Given that folder:

    OMP_NUM_THREADS=1 python scripts/record_comfyui_seedvr2_nodes.py <folder> \\
        tests/nodes/fixtures/comfyui_seedvr2_nodes.json.xz
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from comfyui_recording import MAX_RECORDED_VALUES, b64, write_json  # noqa: E402


def main() -> None:
    folder, out = sys.argv[1:3]
    sys.path.insert(0, folder)
    import nodes_seedvr_ref as ref

    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(38)
    record: dict = {"preprocess": [], "postprocess": [], "chunk": [], "merge": []}

    # Preprocess: a 6-frame RGBA clip 13x18 (padded to 16x32, 9 frames), one image (1 frame kept), 3 frames (to 5),
    # a 5-D batch of two 2-frame clips, values outside [0, 1] (clamped)
    clips = [
        torch.rand(6, 13, 18, 4, generator=g),
        torch.rand(1, 17, 20, 3, generator=g),
        torch.rand(3, 16, 16, 3, generator=g),
        torch.rand(2, 2, 18, 14, 3, generator=g) * 1.4 - 0.2,
    ]
    for clip in clips:
        record["preprocess"].append({"input": b64(clip), "output": b64(ref.preprocess(clip), MAX_RECORDED_VALUES)})

    # PostProcessing: decoded frames (padded, 4n+1) against the original resized frames, every method; an RGBA
    # reference (alpha re-applied); a decoded image smaller than its reference (the reference is resized bicubic)
    # and a 5-D batch
    cases = [
        (torch.rand(9, 16, 32, 3, generator=g), torch.rand(6, 13, 18, 4, generator=g)),
        (torch.rand(1, 16, 24, 3, generator=g), torch.rand(1, 20, 27, 3, generator=g)),
        (torch.rand(1, 2, 16, 16, 3, generator=g), torch.rand(1, 2, 15, 13, 3, generator=g)),
        (torch.rand(10, 16, 24, 3, generator=g), torch.rand(2, 5, 15, 22, 3, generator=g)),
    ]
    for decoded, reference in cases:
        record["postprocess"].append(
            {
                "images": b64(decoded),
                "original_resized_images": b64(reference),
                "outputs": {
                    method: b64(ref.postprocess(decoded, reference, method), MAX_RECORDED_VALUES)
                    for method in ("lab", "wavelet", "adain", "none")
                },
            }
        )

    # TemporalChunk + TemporalMerge: a 16-channel latent of 7 frames (25 pixel frames), chunked at 9 and 13 pixel
    # frames with overlaps 0, 1, 5 (clamped), and a chunk larger than the clip; merged after each chunk is changed
    # (as a sampler would), so the crossfade shows
    latent = torch.randn(1, 16, 7, 3, 4, generator=g)
    record["latent"] = b64(latent)
    for frames, overlap in ((9, 0), (9, 1), (13, 2), (9, 5), (29, 1), (5, 0)):
        chunks, effective = ref.temporal_chunk({"samples": latent}, overlap, frames)
        sampled = [{"samples": c["samples"] + torch.randn(c["samples"].shape, generator=g)} for c in chunks]
        merged = ref.temporal_merge(sampled, [effective])
        record["chunk"].append(
            {
                "frames_per_chunk": frames,
                "temporal_overlap": overlap,
                "effective_overlap": effective,
                "chunks": [b64(c["samples"]) for c in chunks],
            }
        )
        record["merge"].append(
            {
                "latents": [b64(c["samples"]) for c in sampled],
                "temporal_overlap": effective,
                "output": b64(merged["samples"], MAX_RECORDED_VALUES),
            }
        )

    record["source"] = (
        "Comfy-Org/ComfyUI comfy_extras/nodes_seedvr.py and comfy/ldm/seedvr/color_fix.py (newest source, read "
        "2026-12-05), run by scripts/record_comfyui_seedvr2_nodes.py"
    )
    write_json(out, record)


if __name__ == "__main__":
    main()
