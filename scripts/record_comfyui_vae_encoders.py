"""Record what ComfyUI's VAEEncodeForInpaint and InpaintModelConditioning hand to the VAE and put in their
outputs, and how its tiled VAE encode (VAEEncodeTiled) assembles tiles, on fixed tensors, as a test fixture.

Run inside ComfyUI's own environment (it imports ComfyUI's nodes; nothing of ComfyUI is copied here):

    cd <ComfyUI source> && PYTHONPATH=<site>:. OMP_NUM_THREADS=2 <ComfyUI venv>/bin/python \
        /work/main/scripts/record_comfyui_vae_encoders.py /work/main/tests/nodes/fixtures/comfyui_vae_encoders.json.xz

ComfyUI cannot load our tiny demo VAEs, so a stand-in VAE (downscale ratio 8) returns the pixels it would
encode (cropped by ComfyUI's VAE.vae_encode_crop_pixels): the recording holds the pixels each node encodes, its noise mask and its conditioning options,
each tensor by the SHA-256 of its float32 bytes (with shape and sum). The tiled encode runs ComfyUI's
VAE.encode_tiled_ with a toy encoder (8x8 average pool, a fixed 1x1 convolution to 4 channels, tanh) in place
of the VAE's on stripes(); its outputs are stored whole as float32 values too (their pooling and tanh round
differently by an ulp on different CPUs, so the test compares them within ulps); the other inputs are generated from a seed and stored as float32 bytes (base64).
"""

from __future__ import annotations

import hashlib
import sys

import torch
from comfyui_recording import b64, comfyui_on_cpu, write_json

comfyui_on_cpu(sys.argv[1])
import comfy.sd  # noqa: E402

import nodes  # noqa: E402


class EchoVAE:
    """Crops as ComfyUI's VAE.encode does (its own method), then returns the pixels it would encode."""

    downscale_ratio = 8
    crop_input = True

    def spacial_compression_encode(self):
        return self.downscale_ratio

    def encode(self, pixels):
        return comfy.sd.VAE.vae_encode_crop_pixels(self, pixels).clone()


class ToyEncoder:
    def encode(self, x):
        weight = torch.linspace(-1.0, 1.0, 12).reshape(4, 3, 1, 1)
        return torch.tanh(torch.nn.functional.conv2d(torch.nn.functional.avg_pool2d(x, 8), weight))


class TiledVAE:
    """What VAE.encode_tiled_ reads of its VAE, with the toy encoder as its model."""

    first_stage_model = ToyEncoder()
    vae_dtype = torch.float32
    device = output_device = "cpu"
    downscale_ratio = 8
    latent_channels = 4

    def process_input(self, x):
        return x


def stripes(shape: tuple[int, ...]) -> torch.Tensor:
    """Pixels from integer arithmetic and one division, so any process makes the very same values."""
    n = 1
    for d in shape:
        n *= d
    return (((torch.arange(n) * 37 + 11) % 256).float() / 255.0).reshape(shape)


def digest(t: torch.Tensor) -> dict:
    t = t.detach().to(torch.float32).contiguous()
    return {
        "shape": list(t.shape),
        "sha256": hashlib.sha256(t.numpy().tobytes()).hexdigest(),
        "sum": float(t.double().sum()),
    }


def main(out_path: str) -> None:
    torch.manual_seed(0)
    inputs = {
        "pixels_21x30": torch.rand(1, 21, 30, 3),
        "pixels_2x16x24": torch.rand(2, 16, 24, 3),
        "mask_21x30": (torch.rand(1, 21, 30) > 0.7).float(),
        "mask_soft_10x15": torch.rand(10, 15),
        "mask_2x16x24": torch.rand(2, 16, 24),
    }
    combos = [
        ("pixels_21x30", "mask_21x30"),
        ("pixels_21x30", "mask_soft_10x15"),
        ("pixels_2x16x24", "mask_2x16x24"),
        ("pixels_2x16x24", "mask_soft_10x15"),
    ]
    cases = []
    for pixels, mask in combos:
        for grow in (0, 1, 6, 7):
            (latent,) = nodes.VAEEncodeForInpaint().encode(EchoVAE(), inputs[pixels], inputs[mask], grow)
            cases.append(
                {
                    "class": "VAEEncodeForInpaint",
                    "pixels": pixels,
                    "mask": mask,
                    "grow_mask_by": grow,
                    "samples": digest(latent["samples"]),
                    "noise_mask": digest(latent["noise_mask"]),
                }
            )
        for noise_mask in (True, False):
            pos, neg = [[torch.zeros(1, 2, 4), {"strength": 0.5}]], [[torch.ones(1, 2, 4), {}]]
            p, n, latent = nodes.InpaintModelConditioning().encode(
                pos, neg, inputs[pixels], EchoVAE(), inputs[mask], noise_mask
            )
            cases.append(
                {
                    "class": "InpaintModelConditioning",
                    "pixels": pixels,
                    "mask": mask,
                    "noise_mask_flag": noise_mask,
                    "samples": digest(latent["samples"]),
                    "noise_mask": digest(latent["noise_mask"]) if "noise_mask" in latent else None,
                    "concat_latent_image": digest(p[0][1]["concat_latent_image"]),
                    "concat_mask": digest(p[0][1]["concat_mask"]),
                    "negative_keys": sorted(n[0][1]),
                    "positive_keys": sorted(p[0][1]),
                }
            )
    tiled_cases = []
    for shape in ((2, 136, 200, 3), (1, 64, 64, 3)):
        pixels = stripes(shape)
        for tile, overlap in ((64, 0), (64, 24), (128, 32), (192, 64), (512, 64)):
            with torch.inference_mode():  # as ComfyUI runs nodes (its tiling adds in place)
                out = comfy.sd.VAE.encode_tiled_(TiledVAE(), pixels.movedim(-1, 1), tile, tile, overlap)
            tiled_cases.append(
                {
                    "class": "VAEEncodeTiled",
                    "shape": list(shape),
                    "pixels": digest(pixels),
                    "tile_size": tile,
                    "overlap": overlap,
                    "samples": digest(out),
                    "values": b64(out),
                }
            )
    cases += tiled_cases
    fixture = {
        "note": (
            "Recorded by scripts/record_comfyui_inpaint_preprocessing.py in ComfyUI 0.3.64 (commit "
            "a125cd84b054a57729b5eecab930ca9408719832) on the CPU, with a VAE that returns its input and a toy tiled encoder."
        ),
        "inputs": {k: b64(v) for k, v in inputs.items()},
        "cases": cases,
    }
    write_json(out_path, fixture)


if __name__ == "__main__":
    main(sys.argv[1])
