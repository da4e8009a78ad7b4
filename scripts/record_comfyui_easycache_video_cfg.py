"""Record what ComfyUI's EasyCache and its video CFG guidance functions compute, on fixed small tensors, as a
fixture (tests/nodes/fixtures/comfyui_easycache_video_cfg.json.xz).

Run inside ComfyUI's own environment (it imports ComfyUI's modules and runs their node code; nothing of
ComfyUI is copied here):

    cd <ComfyUI source> && PYTHONPATH=<site>:. OMP_NUM_THREADS=2 <ComfyUI venv>/bin/python \
        /work/main/scripts/record_comfyui_easycache_video_cfg.py /work/main/tests/nodes/fixtures/comfyui_easycache_video_cfg.json.xz

VideoLinearCFGGuidance / VideoTriangleCFGGuidance: the sampler_cfg_function each node sets on a stand-in MODEL,
called on seeded noise estimates. EasyCache: the node's calc_cond_batch and diffusion-model wrappers driven by a
small Euler loop over a toy network (0.8 x + 0.05 sigma + a per-cond offset), its holder cloned and its sigmas
prepared as the node's outer-sample wrapper does. ComfyUI batches the conds of one forward pass last-first
(negative before positive); the recorded calls list each pass's conds in that order.
"""

from __future__ import annotations

import sys

import torch
from comfyui_recording import b64, comfyui_on_cpu, write_json

OUT = sys.argv[1]
comfyui_on_cpu()
import comfy.model_sampling  # noqa: E402
import comfy.patcher_extension  # noqa: E402
from comfy_extras import nodes_easycache, nodes_video_model  # noqa: E402

WRAPPERS = comfy.patcher_extension.WrappersMP


def seeded(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


class Recorder:
    """Just enough of a ModelPatcher for the nodes: it records the cfg function and wrappers they set."""

    def __init__(self) -> None:
        self.model_options: dict = {"transformer_options": {}}
        self.wrappers: dict = {}

    def clone(self) -> Recorder:
        return self

    def set_model_sampler_cfg_function(self, fn, disable_cfg1_optimization=False) -> None:
        self.cfg_function = fn

    def add_wrapper_with_key(self, kind, key, fn) -> None:
        self.wrappers[kind] = fn


def video_cfg_cases() -> list[dict]:
    cases = []
    for node in (nodes_video_model.VideoLinearCFGGuidance, nodes_video_model.VideoTriangleCFGGuidance):
        for min_cfg, cond_scale, batch in ((1.0, 7.0, 5), (2.5, 4.0, 3), (3.0, 1.5, 4), (1.0, 8.0, 1), (0.0, 6.0, 2)):
            m = Recorder()
            node().patch(m, min_cfg)
            cond, uncond = seeded(1 + batch, batch, 4, 3, 3), seeded(11 + batch, batch, 4, 3, 3)
            out = m.cfg_function({"cond": cond, "uncond": uncond, "cond_scale": cond_scale})
            cases.append(
                {
                    "node": node.__name__,
                    "min_cfg": min_cfg,
                    "cond_scale": cond_scale,
                    "cond": b64(cond),
                    "uncond": b64(uncond),
                    "out": b64(out),
                }
            )
    return cases


# (name, params, batch size, forward passes per evaluation: the positive (0) / negative (1) conds of each pass in
# ComfyUI's order, cfg)
EASYCACHE_CASES = [
    ("batched_pair", (1.0, 0.15, 0.95), 1, [[1, 0]], 5.0),
    ("separate_passes", (0.6, 0.15, 0.95), 1, [[0], [1]], 5.0),
    ("positive_only_batch2", (0.3, 0.0, 1.0), 2, [[0]], 1.0),
    ("mid_threshold", (0.5, 0.3, 0.8), 1, [[1, 0]], 4.0),
    ("high_threshold", (3.0, 0.1, 0.9), 1, [[0], [1]], 3.0),
    ("zero_threshold", (0.0, 0.0, 1.0), 1, [[1, 0]], 5.0),
]


def easycache_cases() -> list[dict]:
    ms = comfy.model_sampling.ModelSamplingDiscrete()
    sigmas = [float(v) for v in torch.linspace(14.0, 0.05, 13)] + [0.0]
    offsets = {0: 0.3, 1: -0.2}
    cases = []
    for name, (threshold, start, end), batch, passes, cfg in EASYCACHE_CASES:
        m = Recorder()
        nodes_easycache.EasyCacheNode.execute(m, threshold, start, end, False)
        holder = m.model_options["transformer_options"]["easycache"].clone().prepare_timesteps(ms)
        options = {"transformer_options": {"easycache": holder}}
        forward = m.wrappers[WRAPPERS.DIFFUSION_MODEL]
        reset = m.wrappers[WRAPPERS.CALC_COND_BATCH]
        x = seeded(120, batch, 4, 16, 16) * sigmas[0]
        x0 = x.clone()
        calls, outs = [], []
        for i in range(len(sigmas) - 1):
            sigma = torch.tensor([sigmas[i]])
            xc = x / (sigmas[i] ** 2 + 1.0) ** 0.5
            eps: dict[int, torch.Tensor] = {}

            def evaluate(*args):
                for sides in passes:

                    def executor(xb, t, transformer_options, sides=sides):
                        calls.append([i, sides])
                        chunks = xb.chunk(len(sides))
                        return torch.cat(
                            [
                                c * 0.8 + 0.05 * t.reshape(-1, 1, 1, 1)[: c.shape[0]] + offsets[s]
                                for c, s in zip(chunks, sides)
                            ]
                        )

                    executor_obj = type("E", (), {"__call__": lambda self, *a, f=executor: f(*a)})()
                    xb = torch.cat([xc] * len(sides))
                    topts = {
                        "easycache": holder,
                        "sigmas": sigma.expand(xb.shape[0]),
                        "uuids": [f"u{s}" for s in sides],
                    }
                    out = forward(executor_obj, xb, sigma.expand(xb.shape[0]), topts)
                    for k, s in enumerate(sides):
                        eps[s] = out[k * batch : (k + 1) * batch]

            reset(evaluate, options)
            if len(eps) == 2:
                guided = eps[1] + (eps[0] - eps[1]) * cfg
            else:
                guided = eps[0]
            denoised = x - guided * sigmas[i]
            outs.append(b64(denoised))
            x = denoised + (x - denoised) * (sigmas[i + 1] / sigmas[i])
        cases.append(
            {
                "case": name,
                "reuse_threshold": threshold,
                "start_percent": start,
                "end_percent": end,
                "batch": batch,
                "passes": passes,
                "cfg": cfg,
                "offsets": [offsets[0], offsets[1]],
                "sigmas": sigmas,
                "x0": b64(x0),
                "model_calls": calls,
                "denoised": outs,
                "skipped": holder.total_steps_skipped,
            }
        )
    return cases


def main(out_path: str) -> None:
    data = {
        "comfyui": "0.3.64 (a125cd84b054a57729b5eecab930ca9408719832)",
        "recorded_by": "scripts/record_comfyui_easycache_video_cfg.py",
        "torch": torch.__version__,
        "video_cfg": video_cfg_cases(),
        "easycache": easycache_cases(),
    }
    write_json(out_path, data)


if __name__ == "__main__":
    main(OUT)
