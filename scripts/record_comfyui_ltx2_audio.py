"""Record upstream ComfyUI 0.10.0's LTX-2 audio VAE on a tiny random file in the published layout, for
tests/models/test_ltx2_audio.py: ComfyUI's own CausalAudioAutoencoder and Vocoder are built from TINY_CONFIG,
given seeded random weights, saved as a safetensors file whose keys and metadata are those of the published
audio VAE files (audio_vae.*, vocoder.*, metadata "config"), then loaded back through ComfyUI's AudioVAE and used
for its decode and for LTXVEmptyLatentAudio's latent count. Writes <out>.safetensors (the weights, with the input
latent and ComfyUI's waveform as extra tensors under "record.") .

Run inside ComfyUI 0.10.0's own environment (commit 79cdbc81 of hiddenswitch/ComfyUI; nothing of ComfyUI is
copied here; recipe in ../shared/reference/running-real-comfyui.md). No torchaudio exists for torch 2.13: a
placeholder module stands in for it (only the encoder's mel transform and resampling use it, not decoding).

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim> <venv>/bin/python \\
        /work/main/scripts/record_comfyui_ltx2_audio.py /tmp/ltx2_audio_record.safetensors [object_info.json]
"""

from __future__ import annotations

import json
import sys
import types

import torch

# 8 latent channels x 16 frequency bins: ComfyUI's statistics buffers are fixed at 128 features.
_ENCODER = {
    "ch": 8,
    "out_ch": 8,
    "ch_mult": [1, 2, 2],
    "num_res_blocks": 1,
    "attn_resolutions": [],
    "dropout": 0.0,
    "resamp_with_conv": True,
    "in_channels": 2,
    "resolution": 256,
    "z_channels": 8,
    "double_z": True,
    "attn_type": "vanilla",
    "mid_block_add_attention": False,
    "norm_type": "pixel",
    "causality_axis": "height",
    "mel_bins": 64,
}
TINY_CONFIG = {
    "audio_vae": {
        "sampling_rate": 16000,
        "model": {
            "params": {
                "encoder": _ENCODER,
                "decoder": {**_ENCODER, "out_ch": 2, "give_pre_end": False, "tanh_out": False},
                "preprocessing": {"stft": {"hop_length": 160, "filter_length": 1024}},
            }
        },
    },
    "vocoder": {
        "resblock_kernel_sizes": [3, 7],
        "upsample_rates": [5, 4],
        "upsample_kernel_sizes": [10, 8],
        "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5]],
        "upsample_initial_channel": 16,
        "stereo": True,
        "resblock": "1",
    },  # no output_sample_rate: ComfyUI infers 16000 * 20 / 160
}
LATENT_SHAPE = (2, 8, 6, 16)
# (video frames, frame rate) for LTXVEmptyLatentAudio
EMPTY_CASES = [(97, 25), (1, 24), (121, 24), (9, 8)]


def record(out_path: str) -> None:
    sys.modules.setdefault("torchaudio", types.ModuleType("torchaudio"))
    sys.argv = [sys.argv[0], "--cpu"]
    sys.path.insert(0, ".")
    import comfy.options

    comfy.options.enable_args_parsing()
    from comfy.ldm.lightricks.vae.audio_vae import AudioVAE
    from comfy.ldm.lightricks.vae.causal_audio_autoencoder import CausalAudioAutoencoder
    from comfy.ldm.lightricks.vocoders.vocoder import Vocoder
    from safetensors.torch import save_file

    torch.manual_seed(0)
    parts = {
        "audio_vae.": CausalAudioAutoencoder(config=TINY_CONFIG["audio_vae"]),
        "vocoder.": Vocoder(config=TINY_CONFIG["vocoder"]),
    }
    weights = {}
    for prefix, module in parts.items():
        for name, tensor in module.state_dict().items():
            # ComfyUI's ops leave weights uninitialised: seeded values, positive for the std statistics
            # (the vocoder's smaller, so that its tanh output is not mostly saturated)
            scale = 0.2 if prefix == "audio_vae." else 0.04
            value = torch.rand(tensor.shape) + 0.5 if "std-of-means" in name else torch.randn(tensor.shape) * scale
            weights[prefix + name] = value.contiguous()
    metadata = {"config": json.dumps(TINY_CONFIG)}
    vae = AudioVAE(dict(weights), metadata)
    latent = torch.randn(LATENT_SHAPE, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        waveform = vae.decode(latent).float()
    counts = torch.tensor([vae.num_of_latents_from_frames(f, r) for f, r in EMPTY_CASES])
    facts = torch.tensor([vae.latent_channels, vae.latent_frequency_bins, vae.sample_rate, vae.output_sample_rate])
    save_file(
        {
            **weights,
            "record.latent": latent,
            "record.waveform": waveform.contiguous(),
            "record.empty_counts": counts,
            "record.facts": facts,
        },
        out_path,
        metadata=metadata,
    )


def object_info() -> dict:
    """/object_info of LTXVAudioVAELoader, LTXVEmptyLatentAudio and LTXVAudioVAEDecode (call after record())."""
    import importlib

    module = importlib.import_module("comfy_extras.nodes_lt_audio")
    out = {}
    for name in ("LTXVAudioVAELoader", "LTXVEmptyLatentAudio", "LTXVAudioVAEDecode"):
        info = getattr(module, name).GET_NODE_INFO_V1()
        info["python_module"] = "comfy_extras.nodes_lt_audio"
        out[name] = info
    return out


if __name__ == "__main__":
    args = sys.argv[1:]  # record() replaces sys.argv with ComfyUI's
    record(args[0])
    if len(args) > 1:  # the nodes' interfaces, as JSON
        with open(args[1], "w") as f:
            json.dump(object_info(), f, indent=1, default=str)
