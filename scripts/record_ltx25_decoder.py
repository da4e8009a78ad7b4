"""Record what ComfyUI's LTX-2.5 diffusion video decoder computes on a tiny seeded network, for
tests/models/test_ltx25_decoder.py (tests/models/fixtures/comfyui_ltx25_decoder.json).

No runnable ComfyUI has this decoder yet (0.10.0 predates LTX-2.5), so, as issue 38 item 2 asks, ComfyUI's own
module is run at development time: comfy/ldm/lightricks/vae/na_diffusion_decoder.py as read from
comfyanonymous/ComfyUI (commit 2423d1238c80a681508198975b12de62f2402f93), its NADiffusionDecoder and the decode
of its CausalDiffusionVAE (noise from a CPU generator seeded 0), saved outside this repository with its imports
of comfy replaced by stand-ins (comfy.ldm.lightricks.model.get_timestep_embedding from ComfyUI 0.10.0). Nothing of
it is committed. Given that module's path:

    OMP_NUM_THREADS=1 python scripts/record_ltx25_decoder.py <na_diffusion_decoder module.py> \\
        tests/models/fixtures/comfyui_ltx25_decoder.json

The tiny network has per-axis-different kernels and a non-cubic latent so that a time/row/column mix-up shows.
Recorded: the sizes, the seed, the reference's pixels (float32 base64) and its stage-1..4 context checksum."""

from __future__ import annotations

import base64
import importlib.util
import json
import sys
from pathlib import Path

import torch

SIZES = {
    "in_channels": 16,
    "out_channels": 3,
    "patch_size": 2,
    "head_dim": 16,
    "stage_channels": [128, 64, 32, 32, 16],
    "stage_depths": [1, 1, 1, 1, 2],
    "stage_kernels": [[3, 3, 5], [3, 5, 3], [3, 3, 5], [3, 5, 3], [5, 3, 3]],
    "upsamples": [[[1, 2, 2], 2], [[2, 1, 1], 2], [[2, 2, 2], 1], [[2, 2, 2], 2]],
    "stage5_kernel": [5, 3, 3],
    "t_emb_dim": 48,
}
SEED = 0
LATENT = (1, 16, 2, 2, 3)


def constructor_args(sizes: dict) -> dict:
    out = dict(sizes)
    out["stage_kernels"] = tuple(tuple(k) for k in sizes["stage_kernels"])
    out["upsamples"] = tuple((tuple(s), r) for s, r in sizes["upsamples"])
    out["stage5_kernel"] = tuple(sizes["stage5_kernel"])
    return out


def seeded_weights(names_shapes: list[tuple[str, torch.Size]], seed: int) -> dict[str, torch.Tensor]:
    """Weights drawn in name order (module registration orders differ): norms near 1, everything else small."""
    generator = torch.Generator().manual_seed(seed)
    out = {}
    for name, shape in sorted(names_shapes):
        noise = torch.randn(shape, generator=generator)
        out[name] = 1 + 0.1 * noise if "norm" in name else 0.2 * noise
    return out


def latent(seed: int) -> torch.Tensor:
    return torch.randn(LATENT, generator=torch.Generator().manual_seed(seed + 1))


def main(argv: list[str]) -> int:
    module_path, out = argv
    spec = importlib.util.spec_from_file_location("na_reference", module_path)
    reference = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(Path(module_path).parent))
    spec.loader.exec_module(reference)
    torch.set_num_threads(1)
    decoder = reference.NADiffusionDecoder(**constructor_args(SIZES)).eval()
    sd = decoder.state_dict()
    decoder.load_state_dict(seeded_weights([(k, v.shape) for k, v in sd.items()], SEED))
    z = latent(SEED)
    with torch.no_grad():
        context = decoder.forward_pre_diffusion(z.clone())
        pixels = decoder(z.clone(), generator=torch.Generator().manual_seed(0))
    record = {
        "source": "comfyanonymous/ComfyUI 2423d1238c80a681508198975b12de62f2402f93 "
        "comfy/ldm/lightricks/vae/na_diffusion_decoder.py",
        "sizes": SIZES,
        "seed": SEED,
        "latent_shape": list(LATENT),
        "context_shape": list(context.shape),
        "context_sum": float(context.double().sum()),
        "context_abs_sum": float(context.double().abs().sum()),
        "pixels_shape": list(pixels.shape),
        "pixels": base64.b64encode(pixels.float().contiguous().numpy().tobytes()).decode("ascii"),
    }
    Path(out).write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
