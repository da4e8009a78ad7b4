"""Record what ComfyUI's LTX-2.5 audio-video transformer computes on the tiny LTX-2.5 transformer file, for
tests/models/test_ltx25_transformer.py (tests/models/fixtures/comfyui_ltx25_transformer.json).

No runnable ComfyUI has LTX-2.5 (0.10.0 predates it), so, as issue 39 asks, ComfyUI's own modules are run at
development time: comfy/ldm/lightricks/av_model.py (Comfy-Org/ComfyUI 0a29ddae), model.py (e3fe2188),
symmetric_patchifier.py and embeddings_connector.py (comfyanonymous/ComfyUI f45e8b02, given the gated attention
av_model.py hands it and model.py's rotary matrices, as today's model.py no longer has its older helpers), saved
outside this repository in a folder that also holds stand-ins for the comfy modules they import
(comfy.ldm.common_dit.rms_norm, comfy.ldm.modules.attention.optimized_attention as scaled-dot-product attention,
comfy.ops.disable_weight_init's Linear/RMSNorm/LayerNorm, comfy.quant_ops.ck as comfy-kitchen, comfy.model_management
with in_training False, no-op comfy.model_prefetch and patcher wrappers). Nothing of it is committed. Given that folder:

    OMP_NUM_THREADS=1 python scripts/record_comfyui_ltx25_transformer.py <folder> \\
        tests/models/fixtures/comfyui_ltx25_transformer.json

The model is built as ComfyUI's model_detection sizes it (blocks counted, text width from attn2.to_k, the metadata's
"transformer" section, use_keyframes_abs_pos_embedding from the key) and loaded from the tiny file
(nodes/models/ltx25_transformer_demo.py). Recorded per case: the inputs, the connectors' output
(LTXAVModel.preprocess_text_embeds on the unprocessed context) and the network's video and audio outputs."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from comfyui_recording import b64, sha256  # noqa: E402

from nodes.models.ltx25_transformer_demo import build  # noqa: E402

PREFIX = "model.diffusion_model."
VIDEO, AUDIO = (1, 128, 3, 2, 3), (1, 8, 6, 16)
TOKENS = 7
FRAME_RATE = 24.0


def cases() -> list[dict]:
    """Inputs: one sigma for all; image-to-video's per-token timesteps (the first frame kept, t = 0); a batch of
    two with their own sigmas and prompts; a guide frame appended (the first-last frame template's LTXVAddGuide)."""
    g = torch.Generator().manual_seed(5)
    video, audio = torch.randn(VIDEO, generator=g), torch.randn(AUDIO, generator=g)
    context = torch.randn(1, TOKENS, 32, generator=g)
    per_token = torch.full((1, 3 * 2 * 3), 0.6)
    per_token[:, :6] = 0.0
    pair_video, pair_audio = torch.randn((2, *VIDEO[1:]), generator=g), torch.randn((2, *AUDIO[1:]), generator=g)
    # LTXVAddGuide's layout: one guide frame appended after three video frames, its six tokens placed where the
    # first frame's are (pixel positions [B,3,K,2], start and end), its timestep 0 under the noise mask
    guided = torch.randn((1, 128, 4, 2, 3), generator=g)
    frame = torch.tensor([[0.0, 1.0]]).expand(6, 2)
    rows = torch.tensor([[0.0, 32.0], [32.0, 64.0]]).repeat_interleave(3, dim=0)
    cols = torch.tensor([[0.0, 32.0], [32.0, 64.0], [64.0, 96.0]]).repeat(2, 1)
    keyframe_idxs = torch.stack([frame, rows, cols])[None]
    guide_t = torch.full((1, 4 * 6), 0.6)
    guide_t[:, -6:] = 0.0
    return [
        {
            "name": "one_sigma",
            "video": video,
            "audio": audio,
            "context": context,
            "t_video": torch.tensor([0.7]),
            "t_audio": torch.tensor([0.7]),
        },
        {
            "name": "first_frame_kept",
            "video": video,
            "audio": audio,
            "context": context,
            "t_video": per_token,
            "t_audio": torch.full((1, AUDIO[2]), 0.6),
        },
        {
            "name": "batch_of_two",
            "video": pair_video,
            "audio": pair_audio,
            "context": torch.randn(2, TOKENS, 32, generator=g),
            "t_video": torch.tensor([0.9, 0.3]),
            "t_audio": torch.tensor([0.9, 0.3]),
        },
        {
            "name": "guide_frame",
            "video": guided,
            "audio": audio,
            "context": context,
            "t_video": guide_t,
            "t_audio": torch.full((1, AUDIO[2]), 0.6),
            "keyframe_idxs": keyframe_idxs,
            "denoise_mask": (guide_t > 0).float().reshape(1, 1, 4, 2, 3),
        },
    ]


def comfyui_model(path: Path):
    import comfy.ops
    from comfy.ldm.lightricks.av_model import LTXAVModel

    sd = {k[len(PREFIX) :]: v.float() for k, v in load_file(str(path)).items()}
    with safe_open(str(path), "pt") as f:
        metadata = f.metadata()
    to_k = sd["transformer_blocks.0.attn2.to_k.weight"].shape
    config = {
        "num_layers": len({k.split(".")[1] for k in sd if k.startswith("transformer_blocks.")}),
        "attention_head_dim": to_k[0] // 32,
        "cross_attention_dim": to_k[1],
        **json.loads(metadata["config"])["transformer"],
        "use_keyframes_abs_pos_embedding": "keyframes_abs_pos_embedding" in sd,
    }
    model = LTXAVModel(**config, operations=comfy.ops.disable_weight_init, dtype=torch.float32)
    missing, unexpected = model.load_state_dict(sd, strict=False)
    if missing or unexpected:
        raise SystemExit(f"ComfyUI's model does not take the file: missing {missing[:4]}, unexpected {unexpected[:4]}")
    return model.eval()


def main(argv: list[str]) -> int:
    reference, out = argv
    sys.path.insert(0, reference)
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="hA_ltx25_") as tmp:
        path = build(Path(tmp))
        model = comfyui_model(path)
        recorded = []
        with torch.no_grad():
            for case in cases():
                context = model.preprocess_text_embeds(case["context"].clone(), unprocessed=True)
                video, audio = model.forward(
                    [case["video"].clone(), case["audio"].clone()],
                    (case["t_video"], case["t_audio"]),
                    context,
                    None,
                    frame_rate=FRAME_RATE,
                    transformer_options={},
                    keyframe_idxs=case.get("keyframe_idxs"),
                    denoise_mask=case.get("denoise_mask"),
                )
                recorded.append(
                    {
                        "name": case["name"],
                        "inputs": {k: b64(v) for k, v in case.items() if k != "name"},
                        # the prompt's tokens and the first registers after them (all 1024 would weigh 0.5 MB)
                        "connected": b64(context[:, : TOKENS + 9]),
                        "video_out": b64(video),
                        "audio_out": b64(audio),
                    }
                )
        record = {
            "source": "Comfy-Org/ComfyUI comfy/ldm/lightricks/av_model.py 0a29ddae, model.py e3fe2188; "
            "comfyanonymous/ComfyUI symmetric_patchifier.py, embeddings_connector.py f45e8b02 (adapted as said above)",
            "file_sha256": sha256(str(path)),
            "frame_rate": FRAME_RATE,
            "cases": recorded,
        }
    Path(out).write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
