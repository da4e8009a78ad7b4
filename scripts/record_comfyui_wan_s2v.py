"""Record what ComfyUI 0.3.64 computes for Wan 2.2 sound-to-video on the tiny files of nodes/models/wan_s2v_demo.py
(audio_encoders/wav2vec2_large_english_tiny, diffusion_models/wan2.2_s2v_14B_tiny), as the fixture
tests/models/test_wan_s2v.py checks (tests/models/fixtures/comfyui_wan_s2v.json.xz).

Run inside ComfyUI 0.3.64's environment (nothing of ComfyUI is copied here). Its audio encoder module imports
torchaudio, which has no build for this torch: a stand-in outside the repository whose resample passes 16 kHz
audio through (and refuses any other rate) is put first on the path; every waveform recorded here is 16 kHz:

    cd /tmp/c064/src && PYTHONPATH=<torchaudio stand-in>:/tmp/c064/shim:/work/main/scripts:. OMP_NUM_THREADS=2 \\
        /tmp/c064/venv/bin/python /work/main/scripts/record_comfyui_wan_s2v.py \\
        /work/main/tests/models/fixtures/comfyui_wan_s2v.json.xz <models dir> <input dir> \\
        /work/main/workflows_json/wan_s2v_template.json

ComfyUI picks its wav2vec 2.0 configuration by width (1024 or 768 only) and builds WanModel_S2V with the released
widths (4096-wide text, 1024-wide audio features): the tiny files' sizes are given to ComfyUI's own classes here
(AudioEncoderModel with the tiny file's width, one 64-wide head and its 24 layers; WanModel_S2V with the file's
widths and blocks), nothing else changed. Attention is ComfyUI's attention_pytorch (--use-pytorch-cross-attention).

Recorded: the audio encoder's output (last state and all 25 layers) on seeded 16 kHz waveforms (stereo, and a
batch of two, whose normalisation spans the batch); WanSoundImageToVideo's and WanSoundImageToVideoExtend's
conditioning without a VAE (audio bucket, negative zeros, control latent, motion latent, offsets) and with the tiny
Wan 2.1 VAE (reference image, control video, ref_motion; Extend with reference and control); the S2V network's
raw output on seeded inputs with every input, without motion, with a short motion, and with nothing but the
latent; the four nodes' schemas (as object_info reports them) for tests/nodes/test_object_info_matches_comfyui;
and the shipped template workflow (workflows_json/wan_s2v_template.json) run node by node with ComfyUI's classes,
its sound the workspace's example.wav written at 16 kHz (example_16k.wav in the input dir, written beforehand by
comfy_bridge.cli.demo_models.write_example_audio(path, rate=16000)): the frames CreateVideo takes. The tiny umT5,
Wan 2.1 VAE and S2V sizes are given to ComfyUI's classes as scripts/record_comfyui_wan.py does (its helpers are
reused, with the S2V model's audio width read from the file as well).
"""

from __future__ import annotations

import sys

import torch
from comfyui_recording import b64, comfyui_on_cpu, sha256, write_json

OUT, MODELS, INPUT, WORKFLOW = sys.argv[1:5]
import utils.install_util  # noqa: E402, F401  (ComfyUI's package, before a later import shadows the name)

comfyui_on_cpu(flags=("--use-pytorch-cross-attention",))
import comfy.audio_encoders.audio_encoders as audio_encoders  # noqa: E402
import comfy.ldm.wan.model  # noqa: E402
import comfy.ops  # noqa: E402
import comfy.utils  # noqa: E402
import comfy_extras.nodes_audio_encoder as nodes_audio_encoder  # noqa: E402
import comfy_extras.nodes_wan as nodes_wan  # noqa: E402

SOURCE = "ComfyUI 0.3.64"
FILES = {
    "audio_encoder": "audio_encoders/wav2vec2_large_english_tiny.safetensors",
    "s2v": "diffusion_models/wan2.2_s2v_14B_tiny.safetensors",
}
MAX = 32768
WAN21_VAE = "vae/wan_2.1_vae_tiny.safetensors"  # nodes/models/wan_demo.py's


def tiny_audio_encoder():
    """ComfyUI's AudioEncoderModel at the tiny file's sizes (its large layout: every flag as for width 1024)."""
    sd = comfy.utils.load_torch_file(f"{MODELS}/{FILES['audio_encoder']}")
    width = sd["encoder.layer_norm.bias"].shape[0]
    config = {
        "model_type": "wav2vec2",
        "embed_dim": width,
        "num_heads": width // 64,
        "num_layers": len({k.split(".")[2] for k in sd if k.startswith("encoder.layers.")}),
        "conv_norm": True,
        "conv_bias": True,
        "do_normalize": True,
        "do_stable_layer_norm": True,
    }
    model = audio_encoders.AudioEncoderModel(config)
    missing, unexpected = model.load_sd(sd)
    assert not missing and not unexpected, (missing, unexpected)
    return model


def tiny_s2v():
    sd = {k: v.float() for k, v in comfy.utils.load_torch_file(f"{MODELS}/{FILES['s2v']}").items()}
    dim = sd["head.modulation"].shape[-1]
    model = comfy.ldm.wan.model.WanModel_S2V(
        in_dim=16,
        dim=dim,
        ffn_dim=sd["blocks.0.ffn.0.weight"].shape[0],
        text_dim=sd["text_embedding.0.weight"].shape[1],
        out_dim=16,
        num_heads=dim // 128,
        num_layers=len({k.split(".")[1] for k in sd if k.startswith("blocks.")}),
        audio_dim=sd["casual_audio_encoder.encoder.conv1_local.conv.weight"].shape[1],
        operations=comfy.ops.disable_weight_init,
        dtype=torch.float32,
    )
    model.load_state_dict(sd, strict=True)
    return model.eval()


def record_audio(encoder, gen: torch.Generator) -> tuple[dict, dict]:
    """The encoder on a stereo waveform (1 s) and on a batch of two mono ones (0.5 s); returns (records, the stereo
    output for the nodes)."""
    out = {}
    waves = {
        "stereo": 0.3 * torch.randn(1, 2, 16000, generator=gen),
        "batch2": 0.2 * torch.randn(2, 1, 8000, generator=gen) + 0.05,
    }
    kept = None
    for name, wave in waves.items():
        enc = encoder.encode_audio(wave, 16000)
        layers = torch.stack(enc["encoded_audio_all_layers"])
        out[name] = {
            "waveform": b64(wave),
            "encoded": b64(enc["encoded_audio"], MAX),
            "all_layers": b64(layers, MAX),
            "audio_samples": int(enc["audio_samples"]),
        }
        if name == "stereo":
            kept = enc
    return out, kept


def _values(conditioning: list) -> dict:
    """A conditioning's first entry's S2V values."""
    opts = conditioning[0][1]
    rec = {}
    for key in ("audio_embed", "control_video", "reference_motion"):
        if opts.get(key) is not None:
            rec[key] = b64(opts[key], MAX)
    return rec


def record_nodes(encoded: dict, gen: torch.Generator) -> dict:
    text = [[torch.zeros(1, 4, 32), {}]]
    out = {}
    pos, neg, latent = nodes_wan.WanSoundImageToVideo.execute(
        text, text, None, 64, 48, 13, 1, audio_encoder_output=encoded
    ).result
    out["first"] = {
        "inputs": {"width": 64, "height": 48, "length": 13, "batch_size": 1},
        "positive": _values(pos),
        "negative": _values(neg),
        "latent_shape": list(latent["samples"].shape),
    }
    video_latent = torch.randn(1, 16, 4, 6, 8, generator=gen)
    pos, neg, latent = nodes_wan.WanSoundImageToVideoExtend.execute(
        text, text, None, 9, {"samples": video_latent}, audio_encoder_output=encoded
    ).result
    out["extend"] = {
        "inputs": {"length": 9, "video_latent": b64(video_latent)},
        "positive": _values(pos),
        "negative": _values(neg),
        "latent_shape": list(latent["samples"].shape),
    }
    pos, neg, latent = nodes_wan.WanSoundImageToVideoExtend.execute(
        text, text, None, 77, {"samples": video_latent}, audio_encoder_output=encoded
    ).result
    out["extend_past_audio"] = {
        "inputs": {"length": 77, "video_latent": b64(video_latent)},
        "positive": _values(pos),
        "negative": _values(neg),
        "latent_shape": list(latent["samples"].shape),
    }
    return out


def tiny_wan21_vae():
    """ComfyUI's Wan 2.1 VAE on the tiny file: 0.3.64 builds it 96 wide, the tiny one's width is read from the file."""
    import comfy.ldm.wan.vae
    import comfy.sd

    sd = comfy.utils.load_torch_file(f"{MODELS}/{WAN21_VAE}")
    width = sd["encoder.conv1.weight"].shape[0]
    build = comfy.ldm.wan.vae.WanVAE
    if not getattr(build, "tiny", False):
        comfy.ldm.wan.vae.WanVAE = lambda **cfg: build(**{**cfg, "dim": width})
        comfy.ldm.wan.vae.WanVAE.tiny = True
    return comfy.sd.VAE(sd=sd)


def record_nodes_with_vae(encoded: dict, gen: torch.Generator) -> dict:
    """Both nodes with the tiny Wan 2.1 VAE: a reference image, a control video shorter than the clip and a
    three-image ref_motion (grey in front to 73 images), each of another size than the latent's 32x48 (resized,
    centre-cropped); the Extend node with a reference image and control video."""
    vae = tiny_wan21_vae()
    text = [[torch.zeros(1, 4, 32), {}]]
    images = {
        "ref_image": torch.rand(1, 40, 56, 3, generator=gen),
        "control_video": torch.rand(5, 24, 40, 3, generator=gen),
        "ref_motion": torch.rand(3, 32, 32, 3, generator=gen),
    }
    pos, neg, latent = nodes_wan.WanSoundImageToVideo.execute(
        text, text, vae, 48, 32, 9, 1, audio_encoder_output=encoded, **images
    ).result
    first = {"positive": _values(pos), "negative": _values(neg), "latent_shape": list(latent["samples"].shape)}
    first["positive"]["reference_latents"] = [b64(r) for r in pos[0][1]["reference_latents"]]
    video_latent = torch.randn(1, 16, 3, 4, 6, generator=gen)
    pos, neg, latent = nodes_wan.WanSoundImageToVideoExtend.execute(
        text,
        text,
        vae,
        9,
        {"samples": video_latent},
        audio_encoder_output=encoded,
        ref_image=images["ref_image"],
        control_video=images["control_video"],
    ).result
    extend = {"positive": _values(pos), "negative": _values(neg), "latent_shape": list(latent["samples"].shape)}
    extend["positive"]["reference_latents"] = [b64(r) for r in pos[0][1]["reference_latents"]]
    return {
        "images": {k: b64(v) for k, v in images.items()},
        "video_latent": b64(video_latent),
        "first": first,
        "extend": extend,
    }


def record_model(model, gen: torch.Generator) -> dict:
    b, frames, h, w = 2, 3, 8, 8
    inputs = {
        "x": torch.randn(b, 16, frames, h, w, generator=gen),
        "timestep": torch.tensor([700.0, 250.0]),
        "context": torch.randn(b, 24, model.text_dim, generator=gen),
        "audio_embed": torch.randn(
            b, 25, model.casual_audio_encoder.encoder.conv1_local.conv.in_channels, 14, generator=gen
        ),
        "reference_latent": torch.randn(b, 16, 1, h, w, generator=gen),
        "control_video": torch.randn(b, 16, frames, h, w, generator=gen),
        "reference_motion": torch.randn(b, 16, 19, h, w, generator=gen),
        "short_motion": torch.randn(b, 16, 5, h, w, generator=gen),
    }
    cases = {
        "all": ["audio_embed", "reference_latent", "control_video", "reference_motion"],
        "no_motion": ["audio_embed", "reference_latent", "control_video"],
        "short_motion": ["audio_embed", "reference_latent", "short_motion"],
        "bare": [],
    }
    records = {}
    with torch.no_grad():
        for name, keys in cases.items():
            kwargs = {("reference_motion" if k == "short_motion" else k): inputs[k] for k in keys}
            out = model(inputs["x"], inputs["timestep"], inputs["context"], **kwargs)
            records[name] = {"inputs": keys, "out": b64(out, MAX)}
    return {"inputs": {k: b64(v) for k, v in inputs.items()}, "cases": records}


def schemas() -> dict:
    """The four nodes' object_info entries, as ComfyUI 0.3.64 serves them (its server fills python_module with the
    module a node came from; the schema alone leaves it empty)."""
    out = {}
    for module, classes in (
        (nodes_audio_encoder, ("AudioEncoderLoader", "AudioEncoderEncode")),
        (nodes_wan, ("WanSoundImageToVideo", "WanSoundImageToVideoExtend")),
    ):
        for name in classes:
            info = getattr(module, name).GET_NODE_INFO_V1()
            out[info["name"]] = {**info, "python_module": module.__name__}
    return out


SOUND_16K = "example_16k.wav"


def record_workflow() -> dict:
    """The shipped template with its sound at 16 kHz, node by node (see the module docstring)."""
    import importlib
    import json

    import comfy.model_detection
    import folder_paths

    sys.argv[1:] = [OUT, MODELS, INPUT, WORKFLOW, WORKFLOW]  # record_comfyui_wan reads its own arguments on import
    import record_comfyui_wan as wan
    from comfyui_recording import png_rgb, run_node

    folder_paths.set_input_directory(INPUT)
    for kind in ("diffusion_models", "text_encoders", "vae", "loras", "audio_encoders"):
        folder_paths.add_model_folder_path(kind, f"{MODELS}/{kind}", is_default=True)
    wan.tiny_widths()
    detect = comfy.model_detection.detect_unet_config

    def detect_s2v(state_dict, key_prefix, metadata=None):  # ComfyUI builds S2V for 1024-wide audio features
        cfg = detect(state_dict, key_prefix, metadata=metadata)
        if cfg is not None and cfg.get("model_type") == "s2v":
            cfg["audio_dim"] = state_dict[f"{key_prefix}casual_audio_encoder.encoder.conv1_local.conv.weight"].shape[1]
        return cfg

    comfy.model_detection.detect_unet_config = detect_s2v
    tiny_wan21_vae()  # gives ComfyUI's Wan 2.1 VAE the tiny file's width
    classes = wan.node_classes()
    for module, names in (
        ("nodes_audio", ["LoadAudio"]),
        ("nodes_audio_encoder", ["AudioEncoderEncode"]),
        ("nodes_wan", ["WanSoundImageToVideo", "WanSoundImageToVideoExtend"]),
        ("nodes_latent", ["LatentConcat", "LatentCut"]),
        ("nodes_images", ["ImageFromBatch"]),
    ):
        mod = importlib.import_module(f"comfy_extras.{module}")
        classes.update({n: getattr(mod, n) for n in names})
    with open(WORKFLOW) as f:
        prompt = json.load(f)
    (sound,) = [k for k, v in prompt.items() if v["class_type"] == "LoadAudio"]
    prompt[sound]["inputs"]["audio"] = SOUND_16K
    results: dict[str, tuple] = {}

    def run(node_id: str) -> tuple:
        if node_id not in results:
            node = prompt[node_id]
            kind = node["class_type"]
            inputs = {k: run(v[0])[v[1]] if isinstance(v, list) else v for k, v in node["inputs"].items()}
            if kind == "AudioEncoderLoader":
                results[node_id] = (tiny_audio_encoder(),)
            elif kind in ("CreateVideo", "SaveVideo"):
                results[node_id] = (inputs.get("images"),)
            else:
                results[node_id] = run_node(classes[kind], inputs)
        return results[node_id]

    (create,) = [k for k, v in prompt.items() if v["class_type"] == "CreateVideo"]
    frames = run(create)[0]
    return {"prompt": prompt, "frames": png_rgb(frames, MAX)}


def main() -> None:
    gen = torch.Generator().manual_seed(39)
    audio, encoded = record_audio(tiny_audio_encoder(), gen)
    result = {
        "source": SOURCE,
        "files": {name: {"path": path, "sha256": sha256(f"{MODELS}/{path}")} for name, path in FILES.items()},
        "audio_encoder": audio,
        "nodes": record_nodes(encoded, gen),
        "nodes_with_vae": record_nodes_with_vae(encoded, gen),
        "model": record_model(tiny_s2v(), gen),
        "object_info": schemas(),
        "workflow": record_workflow(),
    }
    write_json(OUT, result)


if __name__ == "__main__":
    main()
