"""One CFG-guided model evaluation at a given x and sigma, run on the executors: the model that a node pack's own
sampler function calls (in ComfyUI, the CFGGuider its KSAMPLER runs around). The pack's loop runs here; each
evaluation is one `denoise_step` with the Euler sampler, whose recorded x0 prediction is the guided denoised
prediction at that sigma (the step's x update is not used). Conditionings, the MODEL's patches and options
reach the step as they reach every KSampler step (nodes.ksampler.step_inputs)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from cluster.refs import ModelRef
from nodes import arch
from nodes.inputs import require_model
from nodes.ksampler import GuiderChoice, SamplerChoice, call_model_fn, check_hint_batches, single_frame, step_inputs
from nodes.modelfns.denoise import DenoiseParams
from nodes.modelfns.model_options import DIFFSYNTH, USO, weights_ref


@dataclass(frozen=True)
class GuidedEvaluation:
    """x, sigma -> the guided denoised prediction (awaitable). `frame_axis`: the caller's latents carry a frame
    axis ([B,C,1,H,W], Qwen-Image) that the image family's steps do not."""

    model: ModelRef
    sigmas: torch.Tensor
    tensors: dict[str, torch.Tensor]
    params: DenoiseParams
    frame_axis: bool

    async def __call__(self, x: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        s = torch.as_tensor(sigma, dtype=torch.float32).reshape(-1)[0]
        # On the run's schedule the step sees the run's sigmas and index (context windows lay their windows by
        # step); elsewhere (a solver's intermediate sigma) a one-step schedule from that sigma.
        on_schedule = (self.sigmas[:-1] == s).nonzero()
        if len(on_schedule):
            sigmas, i = self.sigmas, int(on_schedule[0, 0])
        else:
            sigmas, i = torch.stack([s, torch.zeros_like(s)]), 0
        step_x = x[:, :, 0] if self.frame_axis else x
        result = await call_model_fn(
            "denoise_step",
            weights_ref(self.model),
            "model",
            {**self.tensors, "sigmas": sigmas, "x": step_x.to(torch.float32)},
            self.params.replace(step=i),
        )
        out = result["denoised"]
        return out.unsqueeze(2) if self.frame_axis else out


def guided_evaluation(guider: GuiderChoice, sigmas: torch.Tensor, latent: torch.Tensor, seed: int) -> GuidedEvaluation:
    """The guided evaluation of `guider` for a run over `sigmas` on latents shaped like `latent`."""
    model = require_model(guider.model)
    if model.option(DIFFSYNTH):  # its control latent is encoded by the sampling loop (nodes.diffsynth)
        raise ValueError("model: a DiffSynth ControlNet patch is not supported under a node pack's own sampler")
    if model.option(USO):  # its states reach the steps through the sampling loop (nodes.uso)
        raise ValueError("model: a USO style reference is not supported under a node pack's own sampler")
    samples = latent if arch.is_video(model.arch) else single_frame(latent)
    for name in ("positive", "negative") + (("middle",) if guider.middle is not None else ()):
        check_hint_batches(getattr(guider, name), samples.shape[0], name, model.arch)
    sigmas = torch.as_tensor(sigmas, dtype=torch.float32)
    tensors, params = step_inputs(guider, SamplerChoice("euler"), samples, seed, sigmas)
    return GuidedEvaluation(model, sigmas, tensors, params, samples.dim() < latent.dim())
