"""CascadeKSampler: a KSampler that answers with a light model when the discriminator finds its image
good enough, and re-runs the query on a heavy model otherwise (DiffServe's query-aware cascade).

Per image: sample with the light model, decode, score with the `discriminator_score` ModelFn
(confidence = P(real)); keep it when confidence >= threshold, else take the heavy model's image.
The threshold is the widget's, unless `cascade` names a workspace cascade (cascades/*.yaml) whose
controller has decided one. For such a cascade the light image is also kept when the heavy re-run
would miss the SLO. Which model answered and the confidence go to the node's UI output and, when the
prompt carries PNG info (a workflow), into a "cascade" PNG text chunk written by SaveImage.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import torch

from cluster.cascade import declare_workspace_cascades
from cluster.cascade.spec import CascadeSpec, Policy, StageSpec
from cluster.refs import ModelRef
from cluster.runtime import runtime
from nodes.ksampler import common_ksampler
from nodes.loaders import CheckpointLoaderSimple, make_ref, model_file
from nodes.model_nodes import CFG, SEED, STEPS
from nodes.models.discriminator import DEMO_NAME, build_demo_discriminator
from nodes.sampling.samplers import SAMPLER_NAMES
from nodes.sampling.schedules import SCHEDULER_NAMES
from nodes.workspace import active

DISCRIMINATOR_FOLDER = "classifiers"
log = logging.getLogger("nodes.cascade")


def declared_for_active_workspace() -> dict[str, CascadeSpec]:
    """The active workspace's cascades/*.yaml, declared to the process's controller (re-read)."""
    return declare_workspace_cascades(active().root)


def checkpoint_model_key(checkpoint: str) -> str | None:
    """The head's model key of a checkpoint's diffusion model (None: not a file of the checkpoints folder):
    how the cascade controller names a stage's model when it sets its batch size (head_hook.follow_head)."""
    try:
        model = CheckpointLoaderSimple().load_checkpoint(checkpoint)[0]
    except (FileNotFoundError, ValueError, OSError, LookupError) as e:
        log.debug("cascade batch size: %s", e)
        return None
    return None if model is None else model.key


def discriminator_names() -> list[str]:
    """The discriminator files in models/classifiers, plus the demo one (built on first use)."""
    return sorted(set(active().list_files(DISCRIMINATOR_FOLDER)) | {DEMO_NAME})


def discriminator_ref(name: str) -> ModelRef:
    ws = active()
    if name == DEMO_NAME and ws.full_path(DISCRIMINATOR_FOLDER, name) is None:
        build_demo_discriminator(ws.folder_paths(DISCRIMINATOR_FOLDER)[0] / DEMO_NAME)
    return make_ref("discriminator", "efficientnet", [model_file(DISCRIMINATOR_FOLDER, name, "discriminator")])


def _stage(ref: ModelRef, steps: int, cfg: float, sampler: str, scheduler: str) -> StageSpec:
    return StageSpec(Path(ref.sources[0]).name, steps, cfg, sampler, scheduler)


class CascadeKSampler:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL", {"tooltip": "The light model, tried first."}),
                "heavy_model": ("MODEL", {"tooltip": "The heavy model, used when the discriminator rejects."}),
                "vae": (
                    "VAE",
                    {"tooltip": "Decodes the light model's latents (and the heavy one's, unless heavy_vae is given)."},
                ),
                "discriminator": (
                    discriminator_names(),
                    {"tooltip": "Real-vs-generated classifier in models/classifiers."},
                ),
                "seed": SEED,
                "steps": (STEPS[0], {**STEPS[1], "default": 2, "tooltip": "Steps of the light model."}),
                "cfg": (CFG[0], {**CFG[1], "default": 1.0, "tooltip": "Guidance of the light model."}),
                "sampler_name": (SAMPLER_NAMES,),
                "scheduler": (SCHEDULER_NAMES,),
                "heavy_steps": (STEPS[0], {**STEPS[1], "default": 20, "tooltip": "Steps of the heavy model."}),
                "heavy_cfg": (CFG[0], {**CFG[1], "tooltip": "Guidance of the heavy model."}),
                "threshold": (
                    "FLOAT",
                    {
                        "default": 0.5,
                        "min": 0.0,
                        "max": 1.0,
                        "step": 0.005,
                        "tooltip": "Keep the light image when P(real) >= threshold. A named "
                        "adaptive cascade overrides it with its controller's.",
                    },
                ),
                "positive": ("CONDITIONING",),
                "negative": ("CONDITIONING",),
                "latent_image": ("LATENT",),
            },
            "optional": {
                "heavy_positive": ("CONDITIONING", {"tooltip": "The heavy model's, when its text encoder differs."}),
                "heavy_negative": ("CONDITIONING",),
                "heavy_vae": ("VAE",),
                "cascade": (
                    "STRING",
                    {
                        "default": "",
                        "tooltip": "A cascade in the workspace's cascades/ folder: its controller sets the threshold.",
                    },
                ),
            },
            "hidden": {"extra_pnginfo": "EXTRA_PNGINFO", "unique_id": "UNIQUE_ID"},
        }

    RETURN_TYPES = ("IMAGE", "LATENT", "FLOAT", "STRING")
    RETURN_NAMES = ("image", "latent", "confidence", "answered_by")
    OUTPUT_TOOLTIPS = (
        "The answer: the light image where accepted, the heavy one elsewhere.",
        "The answering model's latent per image.",
        "The discriminator's mean confidence in the light images.",
        "Which model answered: light, heavy, or one per image.",
    )
    FUNCTION = "sample"
    CATEGORY = "sampling"
    DESCRIPTION = "Query-aware cascade: a light model first, a heavy model for the images a discriminator rejects."

    async def sample(
        self,
        model,
        heavy_model,
        vae,
        discriminator,
        seed,
        steps,
        cfg,
        sampler_name,
        scheduler,
        heavy_steps,
        heavy_cfg,
        threshold,
        positive,
        negative,
        latent_image,
        heavy_positive=None,
        heavy_negative=None,
        heavy_vae=None,
        cascade="",
        extra_pnginfo=None,
        unique_id=None,
    ):
        from cluster.cascade.controller import default_controller  # scipy's MILP: imported on first use

        rt, controller = runtime(), default_controller()
        declared = declared_for_active_workspace()
        if cascade and cascade not in declared:
            raise ValueError(
                f"cascade: {cascade!r} is not in the workspace's cascades/ folder (known: {sorted(declared)})"
            )
        spec = declared.get(cascade) or CascadeSpec(
            f"{Path(model.sources[0]).name}>{Path(heavy_model.sources[0]).name}",
            _stage(model, steps, cfg, sampler_name, scheduler),
            _stage(heavy_model, heavy_steps, heavy_cfg, sampler_name, scheduler),
            discriminator,
            slo_s=float("inf"),
            policy=Policy(threshold=threshold),
            source="node",
        )
        if not cascade:
            controller.add(spec)
        decided = controller.threshold(spec.name) if cascade else None
        t = threshold if decided is None else decided
        disc = discriminator_ref(discriminator)
        batch = int(latent_image["samples"].shape[0])
        start = time.monotonic()
        controller.record_arrival(spec.name, batch)

        with controller.stage(spec.name, "light", batch):
            (light,) = await common_ksampler(
                model, seed, steps, cfg, sampler_name, scheduler, positive, negative, latent_image
            )
            light_image = (await rt.call("vae_decode", vae, {"latent": light["samples"]}, {}))["image"]
            confidence = (await rt.call("discriminator_score", disc, {"image": light_image}, {}))["confidence"]
        accept = confidence.float() >= t
        image, latent, answered = light_image, light, ["light"] * batch
        if not bool(accept.all()):
            heavy_s = controller.cascades[spec.name].stages["heavy"].latency.latency(batch)
            if time.monotonic() - start + heavy_s > spec.slo_s:
                answered = ["light (deadline)"] * batch  # re-running would miss the SLO: keep the fallback
            else:
                with controller.stage(spec.name, "heavy", batch):
                    (heavy,) = await common_ksampler(
                        heavy_model,
                        seed,
                        heavy_steps,
                        heavy_cfg,
                        sampler_name,
                        scheduler,
                        heavy_positive or positive,
                        heavy_negative or negative,
                        latent_image,
                    )
                    heavy_image = (await rt.call("vae_decode", heavy_vae or vae, {"latent": heavy["samples"]}, {}))[
                        "image"
                    ]
                image, latent, answered = _merge(accept, light_image, heavy_image, light, heavy)
        for c, who in zip(confidence.tolist(), answered):
            controller.record_confidence(spec.name, c, "light" if who.startswith("light") else "heavy")

        info = {
            "cascade": spec.name,
            "threshold": t,
            "confidence": [round(c, 6) for c in confidence.tolist()],
            "answered_by": answered,
            "light": spec.light.checkpoint,
            "heavy": spec.heavy.checkpoint,
        }
        if isinstance(extra_pnginfo, dict):
            extra_pnginfo.setdefault("cascade", {})[str(unique_id)] = info
        label = answered[0] if len(set(answered)) == 1 else ",".join(answered)
        return {"ui": {"cascade": [info]}, "result": (image, latent, float(confidence.float().mean()), label)}


def _merge(
    accept: torch.Tensor, light_image: torch.Tensor, heavy_image: torch.Tensor, light: dict, heavy: dict
) -> tuple[torch.Tensor, dict, list[str]]:
    """Per image: the light result where accepted, the heavy one elsewhere."""
    image = torch.where(accept[:, None, None, None], light_image, heavy_image.to(light_image.dtype))
    if heavy["samples"].shape == light["samples"].shape:
        samples = torch.where(accept[:, None, None, None], light["samples"], heavy["samples"])
    else:  # the two models' latents differ in shape: the latent output follows the heavy model
        samples = heavy["samples"]
    answered = ["light" if a else "heavy" for a in accept.tolist()]
    return image, {**light, "samples": samples}, answered


NODE_CLASS_MAPPINGS = {"CascadeKSampler": CascadeKSampler}
NODE_DISPLAY_NAME_MAPPINGS = {"CascadeKSampler": "KSampler (Cascade)"}
