"""Record what upstream ComfyUI 0.10.0 (commit 79cdbc81 of hiddenswitch/ComfyUI) computes with the HunyuanVideo 1.0 VAE
(Kandinsky 5's video templates' hunyuan_video_vae_bf16) on the tiny file in the published layout
(vae/hunyuan_video_vae_tiny.safetensors, nodes/models/hunyuan_video_vae_demo.py), as the fixture
tests/models/test_hunyuan_video_vae.py checks nodes/models/hunyuan_video_vae.py against
(tests/models/fixtures/comfyui_hunyuan_video_vae.json.xz).

Run inside that ComfyUI's own environment (nothing of ComfyUI is copied here), after `comfy-cluster demo-models`:

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim>:/work/main/scripts:. OMP_NUM_THREADS=1 \\
        <venv>/bin/python /work/main/scripts/record_comfyui_hunyuan_video_vae.py \\
        /work/main/tests/models/fixtures/comfyui_hunyuan_video_vae.json <workspace>

ComfyUI's comfy/sd.py detects the file (a causal decoder.conv_in taking 16 channels) and builds its AutoencoderKL with
conv3d and time compression 4 at fixed sizes (128 x (1, 2, 4, 4), 2 blocks per level): this script gives that
config the tiny file's sizes (read from its tensors) and changes nothing else. Recorded: VAE.encode of seeded frames
(13 frames: the first, a chunk of 8 and one of 4; 3 frames: the first alone; an odd size, centre-cropped) and
VAE.decode of seeded latents (5 latent frames: chunks of 2, 2 and 1; a batch of two), and VAEDecodeTiled's decode in
tiles of time, height and width and of a latent that fits one tile. Inputs are seeded draws the test makes again.
"""

from __future__ import annotations

import sys

import torch
from comfyui_recording import b64, comfyui_on_cpu, sha256, write_json

ARGS = sys.argv[1:3]
comfyui_on_cpu()
import comfy.sd  # noqa: E402
import comfy.utils  # noqa: E402

COMMIT = "79cdbc81"
FILE = "vae/hunyuan_video_vae_tiny.safetensors"
# name -> (seed, frames, height, width) of pixels 0..1 to encode
ENCODE = {"chunks": (1, 13, 48, 64), "first_frame_only": (2, 3, 32, 40), "odd_size": (3, 5, 44, 61)}
# name -> (seed, latent shape) to decode
DECODE = {"chunks": (4, (1, 16, 5, 4, 5)), "batch": (5, (2, 16, 2, 4, 5))}
# VAEDecodeTiled's settings (tile_size, overlap, temporal_size, temporal_overlap) -> (seed, latent shape): tiles in
# time, height and width; a latent that fits one tile
TILED = {"tiles": ((64, 16, 8, 4), 6, (1, 16, 5, 10, 12)), "one_tile": ((256, 64, 64, 8), 7, (1, 16, 2, 4, 5))}
KEPT = 8192  # values kept per output (a strided grid), so that the fixture stays small


def pixels(seed: int, frames: int, height: int, width: int) -> torch.Tensor:
    return torch.rand(frames, height, width, 3, generator=torch.Generator().manual_seed(seed))


def latent(seed: int, shape) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def tiny_sizes(sd: dict) -> dict:
    ch = int(sd["encoder.conv_in.conv.weight"].shape[0])
    levels = len({k.split(".")[2] for k in sd if k.startswith("encoder.down.")})
    sizes = {
        "ch": ch,
        "ch_mult": [int(sd[f"encoder.down.{i}.block.0.conv1.conv.weight"].shape[0]) // ch for i in range(levels)],
        "num_res_blocks": len({k.split(".")[4] for k in sd if k.startswith("encoder.down.0.block.")}),
    }
    kl = comfy.sd.AutoencoderKL
    comfy.sd.AutoencoderKL = lambda ddconfig, **kw: kl(ddconfig={**ddconfig, **sizes}, **kw)
    return sizes


def main() -> None:
    torch.set_num_threads(1)
    out_path, workspace = ARGS
    path = f"{workspace}/models/{FILE}"
    sd = comfy.utils.load_torch_file(path)
    sizes = tiny_sizes(sd)
    vae = comfy.sd.VAE(sd=sd)
    out = {
        "comfyui_commit": COMMIT,
        "file": FILE,
        "file_sha256": sha256(path),
        "sizes": sizes,
        "vae_dtype": str(vae.vae_dtype),
        "latent_channels": vae.latent_channels,
        "encode": {},
        "decode": {},
        "tiled": {},
    }
    with torch.no_grad():
        for name, (seed, *shape) in ENCODE.items():
            z = vae.encode(pixels(seed, *shape))
            out["encode"][name] = b64(z, KEPT)
            print("encode", name, tuple(z.shape), file=sys.stderr)
        for name, (seed, shape) in DECODE.items():
            image = vae.decode(latent(seed, shape))
            out["decode"][name] = b64(image, KEPT)
            print("decode", name, tuple(image.shape), file=sys.stderr)
        import nodes

        for name, (settings, seed, shape) in TILED.items():
            (image,) = nodes.VAEDecodeTiled().decode(vae, {"samples": latent(seed, shape)}, *settings)
            out["tiled"][name] = {"settings": list(settings), "image": b64(image, KEPT)}
            print("tiled", name, tuple(image.shape), file=sys.stderr)
    print("wrote", write_json(out_path, out), file=sys.stderr)


if __name__ == "__main__":
    main()
