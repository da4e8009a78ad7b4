"""Record what today's ComfyUI computes for Marigold V2's two new pieces, as the fixture tests/nodes/test_marigold.py
compares with: ModelSamplingAuraFlow's `sampling` (img_to_img_velocity, ComfyUI's model_sampling.IMG_TO_IMG_VELOCITY,
and flow) driving the template's one Euler step (ManualSigmas "0.5, 0", DisableNoise), and MarigoldV2PostProcess.

Run inside ComfyUI's own environment on a source tree holding the newest ComfyUI's comfy/model_sampling.py,
comfy_extras/nodes_model_advanced.py and comfy_extras/nodes_marigold.py (ComfyUI 0.10.0's tree with those three
modules of Comfy-Org/ComfyUI 2fd2083 / 691e827 in place; nothing of ComfyUI is copied here):

    cd <that tree> && PYTHONPATH=<site>:. OMP_NUM_THREADS=1 <ComfyUI venv>/bin/python \\
        /work/main/scripts/record_comfyui_marigold.py /work/main/tests/nodes/fixtures/comfyui_marigold.json

The sampling runs ComfyUI's own pieces in the order comfy.samplers.KSAMPLER runs them (noise_scaling of the empty
noise, k-diffusion's sample_euler, inverse_noise_scaling) around a stand-in network whose output is a fixed function
of its input and timestep (out = 0.25 * input + 0.1 * timestep), so the parameterisation and the timestep it is given
are what is compared; the network itself is the Qwen-Image transformer tested elsewhere. Post-processing: seeded
decoded images with the edge values (0, 1, the sRGB knee, a flat image), each prediction. Tensors as float32 (base64).
"""

from __future__ import annotations

import base64
import json
import sys

import torch

OUT = sys.argv[1]
sys.argv[1:] = ["--cpu"]  # ComfyUI reads its command line on import
import comfy.cli_args  # noqa: E402

comfy.cli_args.args.cpu = True
import comfy.k_diffusion.sampling as kd  # noqa: E402
from comfy_extras import nodes_custom_sampler, nodes_marigold, nodes_model_advanced  # noqa: E402


def b64(t: torch.Tensor) -> dict:
    t = t.detach().to(torch.float32).contiguous()
    return {"shape": list(t.shape), "f32": base64.b64encode(t.numpy().tobytes()).decode()}


class StandIn:
    """Just enough of a ModelPatcher for the model-sampling patch nodes."""

    def __init__(self) -> None:
        self.model = type("M", (), {"model_config": None})()
        self.patches: dict = {}

    def clone(self) -> StandIn:
        return self

    def get_model_object(self, name: str):
        return self.patches.get(name, object())

    def add_object_patch(self, name: str, value) -> None:
        self.patches[name] = value


def sample(sampling: str, shift: float, latent: torch.Tensor, sigmas: torch.Tensor) -> tuple[torch.Tensor, float]:
    (m,) = nodes_model_advanced.ModelSamplingAuraFlow().patch_aura(StandIn(), shift, sampling)
    ms = m.patches["model_sampling"]

    def denoiser(x, sigma, **_):
        t = ms.timestep(sigma)
        out = 0.25 * ms.calculate_input(sigma, x) + 0.1 * t.view(-1, *([1] * (x.ndim - 1)))
        return ms.calculate_denoised(sigma, out, x)

    x = ms.noise_scaling(sigmas[0], torch.zeros_like(latent), latent)
    x = kd.sample_euler(denoiser, x, sigmas, disable=True)
    return ms.inverse_noise_scaling(sigmas[-1], x), float(ms.timestep(sigmas[0]))


def main() -> None:
    torch.set_num_threads(1)
    sigmas = nodes_custom_sampler.ManualSigmas.execute("0.5, 0").result[0]
    cases = []
    for seed, sampling, shift, shape in (
        (1, "img_to_img_velocity", 1.73, (1, 16, 8, 8)),
        (2, "flow", 1.73, (2, 16, 6, 10)),
    ):
        latent = torch.randn(shape, generator=torch.Generator().manual_seed(seed))
        out, timestep = sample(sampling, shift, latent, sigmas)
        cases.append(
            {"sampling": sampling, "shift": shift, "latent": b64(latent), "timestep": timestep, "out": b64(out)}
        )
    image = torch.rand(2, 5, 7, 3, generator=torch.Generator().manual_seed(3))
    image[0, 0, 0] = torch.tensor([0.0, 1.0, 0.0031308])
    image[0, 0, 1] = 0.5  # a zero normal vector after * 2 - 1
    flat = torch.full((1, 4, 4, 3), 0.25)
    post = []
    for name, img in (("seeded", image), ("flat", flat)):
        for prediction in ("depth", "normals", "albedo"):
            res = nodes_marigold.MarigoldV2PostProcess.execute(img, prediction).result[0]
            post.append({"image": name, "prediction": prediction, "out": b64(res)})
    fixture = {
        "note": (
            "Recorded by scripts/record_comfyui_marigold.py with ComfyUI 0.10.0 carrying the newest ComfyUI's "
            "model_sampling.py (2fd2083), nodes_model_advanced.py (691e827) and nodes_marigold.py (2fd2083), CPU."
        ),
        "sigmas": sigmas.tolist(),
        "sampling": cases,
        "images": {"seeded": b64(image), "flat": b64(flat)},
        "post_process": post,
    }
    with open(OUT, "w") as f:
        json.dump(fixture, f, indent=1)


if __name__ == "__main__":
    main()
