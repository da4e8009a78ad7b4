"""Record upstream ComfyUI 0.10.0's KSampler (comfy.sample.sample) on ltx2-tiny's audio-video pair under a noise
mask on the audio part (LTX-2.3's audio-to-video template keeps its encoded audio that way: SetLatentNoiseMask,
then LTXVConcatAVLatent), as tests/nodes/fixtures/comfyui_ltx2_audio_mask.json (tests/nodes/test_ltx2_sampling.py).

Run like scripts/record_comfyui_ltx2.py, whose tiny-size wrappers and sampler settings it reuses (inside ComfyUI
0.10.0's environment, after nodes.models.ltx2_demo.build_demo_ltx2 wrote the files):

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim>:. OMP_NUM_THREADS=1 <venv>/bin/python \\
        /work/main/scripts/record_comfyui_ltx2_audio_mask.py <models dir> \\
        /work/main/tests/nodes/fixtures/comfyui_ltx2_audio_mask.json

Recorded: a seeded audio latent, a 10x16 audio mask (its first rows 0: those audio frames kept) resized by
ComfyUI to the latent, the video part unmasked (ones), and the sampled pair.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import record_comfyui_ltx2 as base  # noqa: E402
import torch  # noqa: E402


def main(models: str, out: str) -> None:
    sys.argv = [sys.argv[0], "--cpu", "--use-pytorch-cross-attention"]
    import comfy.options

    comfy.options.enable_args_parsing()
    import comfy.nested_tensor
    import comfy.sample
    import comfy.sd
    import node_helpers

    torch.set_num_threads(1)
    path = f"{models}/{base.FILE}"
    patcher = comfy.sd.load_diffusion_model(path)
    base.tiny_text_encoder_sizes(f"{models}/{base.TEXT_ENCODER}", path)
    clip = comfy.sd.load_clip(ckpt_paths=[f"{models}/{base.TEXT_ENCODER}", path], clip_type=comfy.sd.CLIPType.LTXV)
    rec = base.KSAMPLER

    def conditioning(text: str) -> list:
        cond = clip.encode_from_tokens_scheduled(clip.tokenize(text))
        return node_helpers.conditioning_set_values(cond, {"frame_rate": rec["frame_rate"]})

    audio = torch.randn(1, 8, 5, 16, generator=torch.Generator().manual_seed(70))
    audio_mask = torch.ones(1, 10, 16)
    audio_mask[:, :4] = 0.0
    latent = comfy.nested_tensor.NestedTensor([torch.zeros(1, 128, 2, 2, 2), audio])
    mask = comfy.nested_tensor.NestedTensor([torch.ones(1, 1, 2, 2, 2), audio_mask])
    noise = comfy.sample.prepare_noise(latent, rec["seed"])
    with torch.no_grad():
        sampled = comfy.sample.sample(
            patcher,
            noise,
            rec["steps"],
            rec["cfg"],
            rec["sampler"],
            rec["scheduler"],
            conditioning(base.PROMPTS[1]),
            conditioning(""),
            latent,
            denoise=1.0,
            noise_mask=mask,
            seed=rec["seed"],
        )
    video_out, audio_out = sampled.unbind()
    record = {
        "source": "ComfyUI 0.10.0 (hiddenswitch/ComfyUI 79cdbc81, upstream's commits)",
        "recorded_by": "scripts/record_comfyui_ltx2_audio_mask.py",
        "sha256": base.sha256(path),
        "audio": base.b64(audio),
        "audio_mask": base.b64(audio_mask),
        "video_out": base.b64(video_out),
        "audio_out": base.b64(audio_out),
    }
    with open(out, "w") as f:
        json.dump(record, f)


if __name__ == "__main__":
    main(*sys.argv[1:3])
