"""Record upstream ComfyUI 0.10.0's LTXVAddGuide on ltx2-tiny and a KSampler run over the guided audio-video pair,
as tests/nodes/fixtures/comfyui_ltxv_add_guide.json (tests/nodes/test_ltxv_add_guide.py).

Run like scripts/record_comfyui_ltx2.py, whose tiny-size wrappers and sampler settings it reuses (inside ComfyUI
0.10.0's environment, after nodes.models.ltx2_demo.build_demo_ltx2 wrote the files):

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim>:. OMP_NUM_THREADS=1 <venv>/bin/python \\
        /work/main/scripts/record_comfyui_ltxv_add_guide.py <models dir> \\
        /work/main/tests/nodes/fixtures/comfyui_ltxv_add_guide.json

Recorded: an empty 17-frame 64x64 video latent; a seeded 70x90 image added as the last frame (frame_idx -1,
strength 1) and then a seeded 50x40 image as the first frame (frame_idx 0, strength 0.7) on top of it; after each
guide the latent, its noise mask and the positive conditioning's keyframe_idxs; then LTXVConcatAVLatent with a
seeded audio latent and comfy.sample.sample (KSampler's settings of record_comfyui_ltx2.py) on the pair.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import record_comfyui_ltx2 as base  # noqa: E402
import torch  # noqa: E402

GUIDES = [  # (image seed, height, width, frame_idx, strength)
    (81, 70, 90, -1, 1.0),
    (82, 50, 40, 0, 0.7),
]
LATENT = (1, 128, 3, 2, 2)
AUDIO = (1, 8, 7, 16)


def main(models: str, out: str) -> None:
    sys.argv = [sys.argv[0], "--cpu", "--use-pytorch-cross-attention"]
    import comfy.options

    comfy.options.enable_args_parsing()
    import comfy.sample
    import comfy.sd
    import node_helpers
    from comfy_extras.nodes_lt import LTXVAddGuide, LTXVConcatAVLatent

    torch.set_num_threads(1)
    path = f"{models}/{base.FILE}"
    patcher = comfy.sd.load_diffusion_model(path)
    _, _, vae, _ = comfy.sd.load_checkpoint_guess_config(path, output_vae=True, output_clip=False)
    base.tiny_text_encoder_sizes(f"{models}/{base.TEXT_ENCODER}", path)
    clip = comfy.sd.load_clip(ckpt_paths=[f"{models}/{base.TEXT_ENCODER}", path], clip_type=comfy.sd.CLIPType.LTXV)
    rec = base.KSAMPLER

    def conditioning(text: str) -> list:
        cond = clip.encode_from_tokens_scheduled(clip.tokenize(text))
        return node_helpers.conditioning_set_values(cond, {"frame_rate": rec["frame_rate"]})

    positive, negative = conditioning(base.PROMPTS[1]), conditioning("")
    latent = {"samples": torch.zeros(LATENT)}
    record = {"prompt": base.PROMPTS[1], **rec, "latent": list(LATENT), "guides": []}
    for seed, height, width, frame_idx, strength in GUIDES:
        image = torch.rand((1, height, width, 3), generator=torch.Generator().manual_seed(seed))
        positive, negative, latent = LTXVAddGuide.execute(positive, negative, vae, latent, image, frame_idx, strength)
        keyframes = positive[0][1]["keyframe_idxs"]
        record["guides"].append(
            {
                "image": base.b64(image),
                "frame_idx": frame_idx,
                "strength": strength,
                "samples": base.b64(latent["samples"]),
                "noise_mask": base.b64(latent["noise_mask"]),
                "keyframe_idxs": keyframes.tolist(),
            }
        )
        print("guide", frame_idx, tuple(latent["samples"].shape), tuple(keyframes.shape))
    audio = torch.randn(AUDIO, generator=torch.Generator().manual_seed(83))
    (av,) = LTXVConcatAVLatent.execute(latent, {"samples": audio})
    noise = comfy.sample.prepare_noise(av["samples"], rec["seed"])
    with torch.no_grad():
        sampled = comfy.sample.sample(
            patcher,
            noise,
            rec["steps"],
            rec["cfg"],
            rec["sampler"],
            rec["scheduler"],
            positive,
            negative,
            av["samples"],
            denoise=1.0,
            noise_mask=av["noise_mask"],
            seed=rec["seed"],
        )
    video, audio_out = sampled.unbind()
    record.update(audio=base.b64(audio), video_out=base.b64(video), audio_out=base.b64(audio_out))
    print("sampled", float(video.abs().mean()), float(audio_out.abs().mean()))
    with open(out, "w") as f:
        json.dump(record, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
