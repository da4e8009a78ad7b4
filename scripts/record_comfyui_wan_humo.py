"""Record what ComfyUI 0.3.64 computes for Wan HuMo on the tiny files of nodes/models/wan_humo_demo.py
(audio_encoders/whisper_large_v3_tiny, diffusion_models/humo_17B_tiny and humo_1.7B_tiny), as the fixture
tests/models/test_wan_humo.py and tests/e2e/test_wan_humo_template.py check (tests/models/fixtures/comfyui_wan_humo.json.xz).

Run inside ComfyUI 0.3.64's environment (nothing of ComfyUI is copied here). Its Whisper front end calls torchaudio,
which has no build for this torch: the pure-Python torchaudio 2.9.1 wheel, unpacked outside the repository with its
C libraries moved aside (resample and MelSpectrogram need none of them), is put on the path:

    cd /tmp/c064/src && PYTHONPATH=<torchaudio 2.9.1, C libraries aside>:/tmp/c064/shim:/work/main/scripts:. \\
        OMP_NUM_THREADS=2 /tmp/c064/venv/bin/python /work/main/scripts/record_comfyui_wan_humo.py \\
        /work/main/tests/models/fixtures/comfyui_wan_humo.json.xz <models dir> <input dir> \\
        /work/main/workflows_json/wan_humo_template.json

(the models dir holds wan_humo_demo's and wan_demo's files; the input dir example.png and example.wav, as
comfy_bridge.cli.demo_models writes them.) ComfyUI builds WhisperLargeV3 and HuMo's audio parts at the released sizes
(1280-wide, 20-head Whisper; 1280-wide features, 512 hidden, 1536-wide audio tokens): the tiny files' sizes are given
to its own classes here (the Whisper width, one head; the audio projection's and cross-attentions' widths), and the
tiny umT5 and Wan 2.1 VAE sizes as scripts/record_comfyui_wan.py gives them; nothing else changed.

Recorded: the Whisper encoder's last state and its 33 hidden states on seeded waveforms (stereo at 16 kHz, mono at
22.05 kHz, which ComfyUI resamples, and a batch of two, whose log-mel floor spans the batch); WanHuMoImageToVideo's
conditioning with audio (two lengths) and without (its reference image through the VAE: in the template); the HuMo
models' denoised output through ComfyUI's WAN21_HuMo (its extra_conds: the 17B model's blank-frame concat and
36-channel reference) on seeded inputs: with audio and reference (a batch of two), with audio and no reference,
with zero audio (at the tiny width: ComfyUI's 1280-wide zeros fit only the released width) and the 1.7B model; and
the shipped template (workflows_json/wan_humo_template.json) run node by node with ComfyUI's classes: the frames
CreateVideo takes."""

from __future__ import annotations

import sys

import torch
from comfyui_recording import b64, comfyui_on_cpu, png_rgb, run_node, sha256, write_json

OUT, MODELS, INPUT, WORKFLOW = sys.argv[1:5]
import utils.install_util  # noqa: E402, F401  (ComfyUI's package, before a later import shadows the name)

comfyui_on_cpu(flags=("--use-pytorch-cross-attention",))
import comfy.audio_encoders.audio_encoders as audio_encoders  # noqa: E402
import comfy.ldm.wan.model as wan_model  # noqa: E402
import comfy.utils  # noqa: E402
import comfy_extras.nodes_wan as nodes_wan  # noqa: E402

SOURCE = "ComfyUI 0.3.64 (a125cd84), torchaudio 2.9.1's Python code"
FILES = {
    "whisper": "audio_encoders/whisper_large_v3_tiny.safetensors",
    "humo": "diffusion_models/humo_17B_tiny.safetensors",
    "humo_1_7b": "diffusion_models/humo_1.7B_tiny.safetensors",
    "lora": "loras/humo_lightx2v_lora_tiny.safetensors",
}
MAX = 32768
KEPT = 8192  # of each encoder output (a strided grid): the fixture stays small


def tiny_whisper():
    """ComfyUI's AudioEncoderModel (whisper3) at the tiny file's sizes."""
    sd = comfy.utils.load_torch_file(f"{MODELS}/{FILES['whisper']}")
    sd = {k[len("model.") :]: v for k, v in sd.items()}
    width, mels = sd["encoder.conv1.weight"].shape[:2]
    layers = len({k.split(".")[2] for k in sd if k.startswith("encoder.layers.")})
    config = {"model_type": "whisper3", "n_mels": mels, "n_audio_state": width, "n_audio_head": 1}
    model = audio_encoders.AudioEncoderModel({**config, "n_audio_layer": layers})
    missing, unexpected = model.load_sd(sd)
    assert not unexpected and all(k.startswith("feature_extractor.") for k in missing), (missing, unexpected)
    return model


def tiny_humo_parts() -> None:
    """HumoWanModel's audio projection and cross-attentions at the tiny files' widths."""
    sd = comfy.utils.load_torch_file(f"{MODELS}/{FILES['humo']}")
    hidden, inputs = sd["audio_proj.audio_proj_glob_1.layer.weight"].shape
    width = sd["audio_proj.audio_proj_glob_norm.layer.weight"].shape[0]
    sizes = {"channels": inputs // 40, "intermediate_dim": hidden, "output_dim": width}
    proj, wrapper = wan_model.AudioProjModel, wan_model.AudioCrossAttentionWrapper
    wan_model.AudioProjModel = lambda **kw: proj(**{**kw, **sizes})
    wan_model.AudioCrossAttentionWrapper = lambda dim, kv_dim, *a, **kw: wrapper(dim, width, *a, **kw)


# (name, seed, [batch, channels, samples], per-row scale, sample rate): the waveforms, seeded (the test draws them too)
WAVES = [
    ("stereo_16k", 60, [1, 2, 16000], [0.3], 16000),
    ("mono_22k", 61, [1, 1, 15435], [0.2], 22050),
    ("batch2", 62, [2, 1, 8000], [0.3, 0.01], 16000),  # one log-mel floor for both rows
]


def waveform(seed: int, shape: list[int], scales: list[float]) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * torch.tensor(scales).view(-1, 1, 1)


def record_audio(encoder) -> tuple[dict, dict]:
    out, kept = {}, None
    for name, seed, shape, scales, rate in WAVES:
        enc = encoder.encode_audio(waveform(seed, shape, scales), rate)
        out[name] = {
            "seed": seed,
            "shape": shape,
            "scales": scales,
            "sample_rate": rate,
            "encoded": b64(enc["encoded_audio"], KEPT),
            "all_layers": b64(torch.stack(enc["encoded_audio_all_layers"]), KEPT),
            "audio_samples": int(enc["audio_samples"]),
        }
        if name == "stereo_16k":
            kept = enc
    return out, kept


def _values(conditioning: list, audio: bool = True) -> dict:
    """A conditioning's first entry's audio windows (the negative's: only whether all are zero) and reference latents."""
    opts = conditioning[0][1]
    embed = opts["audio_embed"]
    rec = {"audio_embed": b64(embed, MAX)} if audio else {"audio_shape": list(embed.shape), "zero": not embed.any()}
    rec["reference_latents"] = [b64(r) for r in opts.get("reference_latents", [])]
    return rec


def tiny_wan21_vae():
    """ComfyUI's Wan 2.1 VAE on the tiny file: 0.3.64 builds it 96 wide, the tiny one's width is read from the file."""
    import comfy.ldm.wan.vae
    import comfy.sd

    sd = comfy.utils.load_torch_file(f"{MODELS}/vae/wan_2.1_vae_tiny.safetensors")
    width = sd["encoder.conv1.weight"].shape[0]
    build = comfy.ldm.wan.vae.WanVAE
    if not getattr(build, "tiny", False):
        comfy.ldm.wan.vae.WanVAE = lambda **cfg: build(**{**cfg, "dim": width})
        comfy.ldm.wan.vae.WanVAE.tiny = True
    return comfy.sd.VAE(sd=sd)


def record_nodes(encoded: dict) -> dict:
    text = [[torch.zeros(1, 4, 32), {}]]
    node = nodes_wan.WanHuMoImageToVideo
    out = {}
    for name, length in (("audio_13", 13), ("audio_21", 21)):
        pos, neg, latent = node.execute(text, text, None, 64, 48, length, 1, audio_encoder_output=encoded).result
        out[name] = {
            "inputs": {"width": 64, "height": 48, "length": length, "batch_size": 1},
            "positive": _values(pos),
            "negative": _values(neg, audio=False),
            "latent_shape": list(latent["samples"].shape),
        }
    pos, neg, latent = node.execute(text, text, None, 32, 32, 9, 2).result
    out["no_audio"] = {
        "inputs": {"width": 32, "height": 32, "length": 9, "batch_size": 2},
        "audio_shape": list(pos[0][1]["audio_embed"].shape),
        "positive": {"reference_latents": [list(r.shape) for r in pos[0][1]["reference_latents"]]},
        "latent_shape": list(latent["samples"].shape),
    }
    return out


def load_model(name: str):
    import comfy.sd

    return comfy.sd.load_diffusion_model(f"{MODELS}/{FILES[name]}")


def denoised(patcher, x, sigma, context, reference, audio) -> torch.Tensor:
    """ComfyUI's WAN21_HuMo on one batch: its extra_conds (c_concat, reference latent, audio) then apply_model."""
    m = patcher.model
    kwargs = {"noise": x, "device": x.device, "cross_attn": context}
    if reference is not None:
        kwargs["reference_latents"] = [reference]
    if audio is not None:
        kwargs["audio_embed"] = audio
    conds = m.extra_conds(**kwargs)
    ready = {k: v.process_cond(batch_size=x.shape[0], area=None, device=x.device).cond for k, v in conds.items()}
    with torch.no_grad():
        return m.apply_model(x, sigma, **ready)


def record_model(gen: torch.Generator) -> dict:
    width = comfy.utils.load_torch_file(f"{MODELS}/{FILES['humo']}")["audio_proj.audio_proj_glob_1.layer.weight"]
    features = width.shape[1] // 40
    cases = []
    # (name, model, batch, latent frames, h, w, sigma, reference, audio: "seeded" | "zeros" | None)
    plan = [
        ("17b_audio_reference", "humo", 2, 3, 8, 8, 0.7, True, "seeded"),
        ("17b_audio_only", "humo", 1, 2, 6, 8, 0.3, False, "seeded"),
        ("17b_zero_audio", "humo", 1, 1, 8, 6, 0.9, True, "zeros"),
        ("1.7b_audio_reference", "humo_1_7b", 1, 3, 6, 6, 0.5, True, "seeded"),
    ]
    models = {}
    for name, model, b, frames, h, w, sigma, with_ref, audio_kind in plan:
        patcher = models.setdefault(model, load_model(model))
        x = torch.randn(b, 16, frames, h, w, generator=gen)
        context = torch.randn(b, 6, 32, generator=gen)
        reference = torch.randn(1, 16, 1, h, w, generator=gen) if with_ref else None
        audio = None
        if audio_kind == "seeded":
            audio = torch.randn(b, frames, 8, 5, features, generator=gen)
        elif audio_kind == "zeros":
            audio = torch.zeros(b, frames + 1, 8, 5, features)
        out = denoised(patcher, x, torch.full((b,), sigma), context, reference, audio)
        cases.append(
            {
                "name": name,
                "model": model,
                "sigma": sigma,
                "x": b64(x),
                "context": b64(context),
                "reference": None if reference is None else b64(reference),
                "audio": None if audio is None else b64(audio),
                "audio_kind": audio_kind,
                "denoised": b64(out, MAX),
            }
        )
    return {"cases": cases}


def record_workflow() -> dict:
    """The shipped template node by node (see the module docstring)."""
    import importlib
    import json

    import folder_paths

    sys.argv[1:] = [OUT, MODELS, INPUT, WORKFLOW, WORKFLOW]  # record_comfyui_wan reads its own arguments on import
    import record_comfyui_wan as wan

    folder_paths.set_input_directory(INPUT)
    for kind in ("diffusion_models", "text_encoders", "vae", "loras", "audio_encoders"):
        folder_paths.add_model_folder_path(kind, f"{MODELS}/{kind}", is_default=True)
    tiny_wan21_vae()  # gives ComfyUI's Wan 2.1 VAE the tiny file's width
    classes = wan.node_classes()
    for module, names in (
        ("nodes_audio", ["LoadAudio"]),
        ("nodes_audio_encoder", ["AudioEncoderEncode"]),
        ("nodes_wan", ["WanHuMoImageToVideo"]),
        ("nodes_model_advanced", ["ModelSamplingSD3"]),
    ):
        mod = importlib.import_module(f"comfy_extras.{module}")
        classes.update({n: getattr(mod, n) for n in names})
    with open(WORKFLOW) as f:
        prompt = json.load(f)
    results: dict[str, tuple] = {}

    def run(node_id: str) -> tuple:
        if node_id not in results:
            node = prompt[node_id]
            kind = node["class_type"]
            inputs = {k: run(v[0])[v[1]] if isinstance(v, list) else v for k, v in node["inputs"].items()}
            if kind == "AudioEncoderLoader":
                results[node_id] = (tiny_whisper(),)
            elif kind in ("CreateVideo", "SaveVideo"):
                results[node_id] = (inputs.get("images"),)
            else:
                results[node_id] = run_node(classes[kind], inputs)
        return results[node_id]

    (create,) = [k for k, v in prompt.items() if v["class_type"] == "CreateVideo"]
    frames = run(create)[0]
    return {"prompt": prompt, "frames": png_rgb(frames, MAX)}


def main() -> None:
    torch.set_num_threads(2)
    gen = torch.Generator().manual_seed(39)
    sys.argv[1:] = [OUT, MODELS, INPUT, WORKFLOW, WORKFLOW]
    import record_comfyui_wan as wan

    wan.tiny_widths()
    tiny_humo_parts()
    audio, encoded = record_audio(tiny_whisper())
    result = {
        "source": SOURCE,
        "recorded_by": "scripts/record_comfyui_wan_humo.py",
        "files": {name: {"path": path, "sha256": sha256(f"{MODELS}/{path}")} for name, path in FILES.items()},
        "audio_encoder": audio,
        "nodes": record_nodes(encoded),
        "model": record_model(gen),
        "workflow": record_workflow(),
    }
    write_json(OUT, result)


if __name__ == "__main__":
    main()
