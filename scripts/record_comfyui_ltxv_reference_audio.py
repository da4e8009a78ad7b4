"""Record what the newest ComfyUI's LTX-2 audio-video transformer computes with LTXVReferenceAudio's reference audio
tokens (the ID-LoRA's in-context conditioning) on the tiny LTX-2.0 checkpoint and the tiny LTX-2.5 transformer, for
tests/models/test_ltxv_reference_audio.py (tests/models/fixtures/comfyui_ltxv_reference_audio.json.xz).

No runnable ComfyUI has the reference audio (0.10.0 predates it), so, as issue 39 asks, ComfyUI's own modules are run
at development time: comfy/ldm/lightricks/av_model.py, model.py, symmetric_patchifier.py and embeddings_connector.py
of a recent ComfyUI (the reference-audio code as in Comfy-Org/ComfyUI 0a29ddae's av_model.py: the tokens go before
the audio at timestep 0 and at times just before 0, the cross-modal gates follow the other modality's largest
timestep, the reference outputs are dropped), saved outside this repository in a folder that also holds stand-ins
for the comfy modules they import (comfy.ldm.common_dit.rms_norm, comfy.ldm.modules.attention.optimized_attention as
scaled-dot-product attention, comfy.ops.disable_weight_init's Linear/RMSNorm/LayerNorm and linear_input_act as
linear(gelu_tanh(x)), comfy.quant_ops.ck as comfy-kitchen, comfy.model_management with in_training False, no-op
comfy.model_prefetch and patcher wrappers). Nothing of it is committed. Given that folder:

    OMP_NUM_THREADS=1 python scripts/record_comfyui_ltxv_reference_audio.py <folder> \\
        tests/models/fixtures/comfyui_ltxv_reference_audio.json

Each model is built as ComfyUI's model_detection sizes it (blocks counted, text width from attn2.to_k, the
metadata's "transformer" section) and loaded from the tiny file. Recorded per case: the network's video and audio
outputs (the inputs are seeded: the test makes them again with cases())."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nodes.models import ltx2_demo, ltx25_transformer_demo  # noqa: E402
from scripts.comfyui_recording import b64, sha256, write_json  # noqa: E402

PREFIX = "model.diffusion_model."
VIDEO, AUDIO = (1, 128, 3, 2, 3), (1, 8, 6, 16)
REF_TOKENS = 5
FRAME_RATE = 24.0


def cases(context_width: int, ltx25: bool) -> list[dict]:
    """One sigma; image-to-video's per-token timesteps (the first frame kept); a batch of two sharing one reference
    (ComfyUI's CONDConstant: one row, expanded to the batch)."""
    g = torch.Generator().manual_seed(11)
    video, audio = torch.randn(VIDEO, generator=g), torch.randn(AUDIO, generator=g)
    ref = torch.randn(1, REF_TOKENS, 128, generator=g)
    context = torch.randn(1, 7, context_width, generator=g)
    per_token = torch.full((1, 3 * 2 * 3), 0.6)
    per_token[:, :6] = 0.0
    pair_video, pair_audio = torch.randn((2, *VIDEO[1:]), generator=g), torch.randn((2, *AUDIO[1:]), generator=g)
    out = [
        {"name": "one_sigma", "video": video, "audio": audio, "context": context, "ref": ref},
        {"name": "first_frame_kept", "video": video, "audio": audio, "context": context, "ref": ref},
        {"name": "batch_of_two", "video": pair_video, "audio": pair_audio, "ref": ref},
    ]
    out[0].update(t_video=torch.tensor([0.7]), t_audio=torch.tensor([0.7]))
    out[1].update(t_video=per_token, t_audio=torch.full((1, AUDIO[2]), 0.6))
    out[2].update(
        context=torch.randn(2, 7, context_width, generator=g),
        t_video=torch.tensor([0.9, 0.3]),
        t_audio=torch.tensor([0.9, 0.3]),
    )
    for case in out:
        case["unprocessed"] = ltx25
    return out


def comfyui_model(path: Path):
    import comfy.ops
    from comfy.ldm.lightricks.av_model import LTXAVModel

    sd = {k[len(PREFIX) :]: v.float() for k, v in load_file(str(path)).items() if k.startswith(PREFIX)}
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
    # LTX-2.0's checkpoint keeps its text connectors for the text encoder, which ComfyUI also builds here
    missing = [k for k in missing if not k.startswith(("video_embeddings_connector.", "audio_embeddings_connector."))]
    if missing or unexpected:
        raise SystemExit(f"ComfyUI's model does not take the file: missing {missing[:4]}, unexpected {unexpected[:4]}")
    return model.eval()


def record(model, path: Path, family: str, ltx25: bool) -> list[dict]:
    width = model.cross_attention_dim + model.audio_cross_attention_dim if ltx25 else 2 * model.caption_channels
    recorded = []
    with torch.no_grad():
        for case in cases(width, ltx25):
            context = case["context"].clone()
            if ltx25:
                context = model.preprocess_text_embeds(context, unprocessed=True)
            video, audio = model.forward(
                [case["video"].clone(), case["audio"].clone()],
                (case["t_video"], case["t_audio"]),
                context,
                None,
                frame_rate=FRAME_RATE,
                transformer_options={},
                ref_audio={"tokens": case["ref"].clone()},
            )
            recorded.append(
                {
                    "name": f"{family}_{case['name']}",
                    "family": family,
                    "case": case["name"],
                    "context_width": width,  # the inputs are cases(width, ltx25)'s, seeded: not stored
                    "video_out": b64(video),
                    "audio_out": b64(audio),
                }
            )
    return recorded


def main(argv: list[str]) -> int:
    reference, out = argv
    sys.path.insert(0, reference)
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="refaudio_") as tmp:
        ltx2 = Path(tmp) / "ltx2.safetensors"
        save_file(ltx2_demo.tiny_ltx2_state_dict(), str(ltx2), metadata=ltx2_demo.metadata())
        ltx25 = ltx25_transformer_demo.build(Path(tmp))
        recorded = record(comfyui_model(ltx2), ltx2, "ltx2", False)
        recorded += record(comfyui_model(ltx25), ltx25, "ltx25", True)
        record_ = {
            "source": "ComfyUI comfy/ldm/lightricks av_model.py / model.py with the reference audio (as Comfy-Org/"
            "ComfyUI 0a29ddae), run with stand-in comfy modules as said above",
            "file_sha256": {"ltx2": sha256(str(ltx2)), "ltx25": sha256(str(ltx25))},
            "frame_rate": FRAME_RATE,
            "cases": recorded,
        }
    write_json(out, record_)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
