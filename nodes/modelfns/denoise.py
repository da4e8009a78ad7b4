"""One denoising step: the diffusion model (and its ControlNets) evaluated with CFG inside one
sampler update. The paper's granularity: a 20-step KSampler is 20 invocations of this ModelFn.

The sampler's multistep history and noise-generator state travel as `state.*` tensors, so a step
can run on any executor and a re-run reproduces its output.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from functools import partial
from types import SimpleNamespace
from typing import Any

import torch

from cluster.call import Params
from cluster.modelfn import ModelFn, register
from cluster.refs import ModelRef, on_this_machine
from cluster.scheduling.batching import Call, freeze
from nodes.conditioning_areas import area_and_mult, crop
from nodes.modelfns import cfg_split, diffsynth, gligen
from nodes.modelfns.hooks import HookWeights, entry_hooks, uses_hooks
from nodes.modelfns.model_patches import combine, perp_neg, post_cfg, pre_cfg, skips_uncond
from nodes.modelfns.network_patches import CALC_COND, apply_model, wrap_forward, wrap_prediction
from nodes.modelfns.shared_forward import run_lanes
from nodes.models import anima_lllite, unclip
from nodes.models.components import ANIMA_KEYS, BYT5_KEYS, HIDREAM_KEYS, TEXT_MASK_KEYS, DiffusionModel
from nodes.models.model_patch import ANIMA_LLLITE
from nodes.models.svd import DEFAULT_ADM as SVD_DEFAULT_ADM
from nodes.models.unet import REFINER_AESTHETIC
from nodes.sampling import context_windows
from nodes.sampling.model_sampling import ModelSampling, model_sampling_from_config
from nodes.sampling.sampler_base import DENOISED
from nodes.sampling.samplers import get_sampler, run_step

STATE_PREFIX = "state."
S2V_KEYS = ("audio_embed", "reference_motion", "control_video")  # Wan S2V's inputs (nodes.conditioning's)
# inputs a context window leaves whole: the sampler's and the inpainting's tensors over the whole latent
_UNCUT = ("x", "sigmas", "noise", "latent_image", "denoise_mask")


def cfg_at(overrides: tuple, sigma: float, cfg: float) -> float:
    """The cfg of an evaluation at `sigma`: that of the last CFGOverride (the one nearest the sampler) whose
    range low < sigma <= high holds it, else the guider's own."""
    for low, high, value in overrides:
        if low < sigma <= high:
            cfg = value
    return cfg


def _shape(t: torch.Tensor | None) -> tuple[int, ...] | None:
    return None if t is None else tuple(t.shape)


def _active(sigma: float, start: float, end: float) -> bool:
    # start_percent maps to the larger sigma; an entry applies while end <= sigma <= start.
    return end <= sigma <= start


class GuidedDenoiser:
    """x, sigma -> CFG-combined denoised prediction, batching compatible conds into one forward pass
    as ComfyUI does (cond and uncond together when their shapes and ControlNets agree)."""

    def __init__(
        self,
        model: DiffusionModel,
        ms: ModelSampling,
        inputs: dict[str, torch.Tensor],
        params: DenoiseParams,
        load_control: Callable[[ModelRef], Any],
        state: dict[str, torch.Tensor] | None = None,
        keep_uncond: bool = False,
        hook_weights: HookWeights | None = None,
        uncond: tuple[DiffusionModel, ModelSampling] | None = None,
    ) -> None:
        self.model, self.ms, self.inputs = model, ms, inputs
        self.hook_weights = hook_weights  # cond entries with weight hooks (nodes.modelfns.hooks)
        self.cfg = params.cfg
        self.positive = params.positive
        self.negative = params.negative
        self.load_control = load_control
        self.latent_size = params.image_size
        self.latent_shapes = params.latent_shapes
        self.seed = params.seed  # MiniMax H3 noises its keyframes from the sampling seed, as ComfyUI's extra_conds
        self.denoise_mask = inputs.get("denoise_mask")
        self.latent_image = inputs.get("latent_image")
        self.noise = inputs.get("noise")
        self.patches = params.model_patches or {}
        # MiniMaxH3SigmaShift's video and audio shifts: the MiniMax H3 transformer reads them per evaluation
        self.av_shifts = {k: v for k, v in params.model_sampling.items() if k.startswith("minimax_shift_")}
        if params.av_cfg is not None:
            self._modality_cfg(*params.av_cfg)
        if self.patches:  # post-CFG functions may run the model again (PAG, SAG), as ComfyUI's calc_cond_batch
            self.patches = {**self.patches, CALC_COND: self._calc_cond_batch}
        self.middle = params.middle
        if any(e.get("gligen") for e in self.positive):  # ComfyUI gives the other sides the prompt's text boxes
            self.negative = gligen.fill_other_side(self.positive, self.negative)
            self.middle = None if self.middle is None else gligen.fill_other_side(self.positive, self.middle)
        self.dual = params.dual_cfg
        self.perp = params.perp_neg
        # CFGOverride's ranges; DualCFGGuider's scales are its own (ComfyUI's override sets a cfg it never reads)
        self.cfg_overrides = params.cfg_overrides or ()
        self.rope_options = params.rope_options  # ScaleROPE: read by the Flux networks
        self.diffsynth = params.diffsynth  # DiffSynth ControlNets acting inside the Qwen-Image blocks
        self.uso = params.uso  # USO style projectors whose tokens go before the Flux text tokens
        self.infinitetalk = params.infinitetalk  # WanInfiniteTalkToVideo: (patch ref, audio scale, masked)
        self._audio_tokens: torch.Tensor | None = None
        self.uncond = uncond  # DualModelGuider's negative MODEL and its model sampling
        windows = params.context_windows  # ContextWindowsManual: evaluations window by window
        self.context_windows = None if windows is None else context_windows.ContextWindows(**windows)
        self.state = state
        self.given: cfg_split.GivenPredictions | None = None  # a CFG split's two sides, made on other executors
        # The CFG++ samplers step along the negative prediction: ComfyUI's samplers read it with a post-CFG
        # function appended last and make the negative side run even at cfg 1. Read it the same way.
        self.uncond_denoised: torch.Tensor | None = None
        if keep_uncond:
            self.patches = {
                **self.patches,
                "disable_cfg1_optimization": True,
                "sampler_post_cfg_function": list(self.patches.get("sampler_post_cfg_function", []))
                + [self._keep_uncond],
            }

    def _modality_cfg(self, video_cfg: float, audio_cfg: float) -> None:
        """LTXVDualCFGGuider: on an audio-video pair with unequal scales, the guider's CFG function gives the video
        part video_cfg and the audio part audio_cfg (both sides always evaluated, the cfg the larger scale, as
        ComfyUI's Guider_LTXAVDualCFG); otherwise plain CFG at video_cfg."""
        if self.latent_shapes is None or math.isclose(video_cfg, audio_cfg):
            self.cfg = video_cfg
            return
        self.cfg = max(video_cfg, audio_cfg)
        split = math.prod(self.latent_shapes[0][1:])  # a sample's video values come first in the packed x
        self.patches = {
            **self.patches,
            "sampler_cfg_function": ModalityCfg(video_cfg, audio_cfg, split),
            "disable_cfg1_optimization": True,
        }

    def _keep_uncond(self, args: dict) -> torch.Tensor:
        self.uncond_denoised = args["uncond_denoised"]
        return args["denoised"]

    def __call__(self, x: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        mask = self.denoise_mask
        if mask is not None:
            if "denoise_mask_function" in self.patches:  # e.g. Differential Diffusion's per-step mask
                mask = self.patches["denoise_mask_function"](
                    sigma,
                    mask,
                    extra_options={
                        "model": SimpleNamespace(inner_model=SimpleNamespace(model_sampling=self.ms)),
                        "sigmas": self.inputs["sigmas"],
                    },
                )
            # Inpainting: outside the mask, the latent is the original image noised to this sigma.
            keep = 1.0 - mask
            x = (
                x * mask
                + self.model.inpaint_latent(self.ms, sigma.reshape(-1)[:1], self.noise, self.latent_image) * keep
            )
        s = float(sigma.reshape(-1)[0])
        if self.dual is not None:
            out = self._dual_cfg(x, sigma, s)
        else:
            base, self.cfg = self.cfg, cfg_at(self.cfg_overrides, s, self.cfg)
            try:
                if self.perp is not None:
                    out = self._perp_neg(x, sigma, s)
                else:
                    out = self._plain_cfg(x, sigma, s) if self.uncond is None else self._dual_model(x, sigma, s, base)
            finally:
                self.cfg = base
        if mask is not None:
            out = out * mask + self.latent_image * (1.0 - mask)
        return out

    def _plain_cfg(self, x: torch.Tensor, sigma: torch.Tensor, s: float) -> torch.Tensor:
        given = self.given.take(x, sigma) if self.given is not None else None
        if given is not None:
            cond, uncond = given
        else:
            skip_uncond = skips_uncond(self.patches, self.cfg)
            cond, uncond = self._predict(x, sigma, s, [self.positive, None if skip_uncond else self.negative])
        return self._cfg(cond, uncond, self.cfg, x, sigma, (self.positive, self.negative))

    def side_prediction(self, x: torch.Tensor, sigma: torch.Tensor, side: str) -> torch.Tensor:
        """One guidance side's prediction at (x, sigma), as the unsplit evaluation makes it (a CFG split's half)."""
        (prediction,) = self._predict(x, sigma, float(sigma.reshape(-1)[0]), [getattr(self, side)])
        return prediction

    def _dual_model(self, x: torch.Tensor, sigma: torch.Tensor, s: float, guider_cfg: float) -> torch.Tensor:
        """DualModelGuider: the positive side on the MODEL, the negative side on the negative MODEL (its own
        network and model sampling) in a pass of its own, then guidance. At a guider cfg of 1 the negative MODEL
        is never used, and at an evaluation's cfg of 1 the positive prediction is the result (no guidance
        functions), as ComfyUI's Guider_DualModel does."""
        (cond,) = self._predict(x, sigma, s, [self.positive])
        cfg1_skip = not self.patches.get("disable_cfg1_optimization", False)
        if math.isclose(guider_cfg, 1.0) or (math.isclose(self.cfg, 1.0) and cfg1_skip):
            return cond
        saved = self.model, self.ms
        self.model, self.ms = self.uncond
        try:
            (uncond,) = self._predict(x, sigma, s, [self.negative])
        finally:
            self.model, self.ms = saved
        return self._cfg(cond, uncond, self.cfg, x, sigma, (self.positive, self.negative))

    def _cfg(
        self,
        cond: torch.Tensor,
        uncond: torch.Tensor | None,
        cfg: float,
        x: torch.Tensor,
        sigma: torch.Tensor,
        conds: tuple[list, list],
    ) -> torch.Tensor:
        """ComfyUI's cfg_function: uncond + (cond - uncond) * cfg, or the patches' replacement for it."""
        if self.patches:
            return combine(self.patches, cond, uncond, cfg, x, sigma, self.ms, conds, self.state)
        return cond if uncond is None else uncond + (cond - uncond) * cfg

    def _perp_neg(self, x: torch.Tensor, sigma: torch.Tensor, s: float) -> torch.Tensor:
        """PerpNegGuider: positive, negative and empty prompt in one batch, the pre-CFG functions on the three,
        Perp-Neg guidance, then the post-CFG functions (ComfyUI's Guider_PerpNeg). A neg_scale of 0 skips the
        negative side, and with cfg 1 also the empty one (they predict zeros)."""
        neg_scale, negative, empty = float(self.perp["neg_scale"]), self.negative, self.middle
        if not self.patches.get("disable_cfg1_optimization", False) and math.isclose(neg_scale, 0.0):
            negative = None
            if math.isclose(self.cfg, 1.0):
                empty = None
        conds = [self.positive, negative, empty]
        outs = [torch.zeros_like(x) if p is None else p for p in self._predict(x, sigma, s, conds)]
        model = SimpleNamespace(model_sampling=self.ms)
        pos, neg, emp = pre_cfg(self.patches, outs, self.cfg, x, sigma, model, conds, self.state)
        out = perp_neg(pos, neg, emp, neg_scale, self.cfg)
        return post_cfg(
            self.patches,
            out,
            pos,
            neg,
            self.cfg,
            x,
            sigma,
            model,
            (self.positive, negative),
            empty_cond=empty,
            empty_cond_denoised=emp,
        )

    def _dual_cfg(self, x: torch.Tensor, sigma: torch.Tensor, s: float) -> torch.Tensor:
        """DualCFGGuider: cond1 (positive) over cond2 (middle) at cfg, cond2 over negative at cfg2.
        "regular" adds the two differences (skipping the sides a scale of 1 makes unneeded, as ComfyUI
        does); "nested" applies cfg2 to the result of the first guidance. A skipped side predicts zeros."""
        cfg2, nested = float(self.dual["cfg2"]), bool(self.dual["nested"])
        negative, middle = self.negative, self.middle
        if not nested and not self.patches.get("disable_cfg1_optimization", False) and math.isclose(cfg2, 1.0):
            negative = None
            if math.isclose(self.cfg, 1.0):
                middle = None
        neg, mid, pos = (
            torch.zeros_like(x) if p is None else p
            for p in self._predict(x, sigma, s, [negative, middle, self.positive])
        )
        if nested:
            text = self._cfg(pos, mid, self.cfg, x, sigma, (self.positive, self.middle))
            return neg + cfg2 * (text - neg)
        return self._cfg(mid, neg, cfg2, x, sigma, (self.middle, self.negative)) + (pos - mid) * self.cfg

    def _predict(
        self, x: torch.Tensor, sigma: torch.Tensor, s: float, sides_entries: list[list | None]
    ) -> list[torch.Tensor | None]:
        if self.infinitetalk:  # ComfyUI's apply-model wrapper: the motion latent over the input's first frames
            motion = self.inputs["infinitetalk.motion"]
            x = x.clone()
            x[:, :, : motion.shape[2]] = motion.to(x)
        cw = self.context_windows
        if cw is None or not cw.applies(x):
            return self._predict_whole(x, sigma, s, sides_entries)
        step = context_windows.step_index(self.inputs["sigmas"], sigma)
        n = x.shape[cw.dim]

        def evaluate(window: list[int]) -> list[torch.Tensor | None]:
            # ComfyUI's rule: a conditioning tensor as long as the latent along dim is cut like it (ControlNet
            # hints are not: ComfyUI leaves the control objects whole)
            whole, whole_mask = self.inputs, self.denoise_mask
            self.inputs = {
                k: context_windows.take(t, window, cw.dim)
                if k not in _UNCUT
                and not k.startswith(STATE_PREFIX)
                and ".control." not in k
                and isinstance(t, torch.Tensor)
                and t.dim() > cw.dim
                and t.shape[cw.dim] == n
                else t
                for k, t in whole.items()
            }
            if whole_mask is not None and whole_mask.dim() > cw.dim and whole_mask.shape[cw.dim] == n:
                self.denoise_mask = context_windows.take(whole_mask, window, cw.dim)
            try:
                sub_sigma = sigma if cw.dim != 0 or sigma.numel() == 1 else sigma.reshape(-1)[window]
                return self._predict_whole(context_windows.take(x, window, cw.dim), sub_sigma, s, sides_entries)
            finally:
                self.inputs, self.denoise_mask = whole, whole_mask

        return context_windows.blend(cw, x, step, evaluate, len(sides_entries))

    def _predict_whole(
        self, x: torch.Tensor, sigma: torch.Tensor, s: float, sides_entries: list[list | None]
    ) -> list[torch.Tensor | None]:
        """Per side (a list of cond entries, or None for a side not evaluated), the weighted average of its
        entries' denoised predictions, each on its area with its weight (ComfyUI's calc_cond_batch); entries
        of all sides whose crops, embeddings and ControlNets agree share one forward pass."""
        sides = [(str(k), entries) for k, entries in enumerate(sides_entries) if entries is not None]
        groups: dict[tuple, list[tuple[str, dict, tuple | None, torch.Tensor]]] = {}
        placed = [
            (side, e, *area_and_mult(e, self.inputs.get(f"{e['key']}.mask"), x))
            for side, entries in sides
            for e in entries
            if not e.get("default") and _active(s, e["sigma_start"], e["sigma_end"])
        ]
        placed += self._defaults(sides, placed, s, x)
        for side, e, area, mult in placed:
            context = self.inputs[f"{e['key']}.context"]
            controls = tuple(
                (c["ref"].key, c["strength"], c["sigma_start"], c["sigma_end"], c["hint_id"]) for c in e["controls"]
            )
            if self.hook_weights is not None:
                self.hook_weights.prepare(entry_hooks(e), s)
            cn_context = self.inputs.get(f"{e['key']}.controlnet_context")
            gkey = (
                tuple(mult.shape),
                tuple(context.shape),
                controls,
                None if cn_context is None else tuple(cn_context.shape),
                f"{e['key']}.pooled" in self.inputs,
                e.get("guidance"),
                e.get("guidance_disabled", False),
                tuple((h.hook.uid, h.hook.keyframes.uid) for h in entry_hooks(e)),
                tuple(tuple(self.inputs[f"{e['key']}.ref.{i}"].shape[1:]) for i in range(e.get("ref_latents", 0))),
                e.get("ref_latents_method"),
                tuple(e.get("image_slots", ())),
                tuple(e.get("vace_strength", ())),  # a constant of the batch, as ComfyUI's CONDConstant
                tuple(e.get("keyframe_frames", ())),  # MiniMax H3: the packed sequence's keyframe rows
                tuple(  # MiniMax H3: its reference images' rows
                    tuple(self.inputs[f"{e['key']}.minimax_ref.{i}"].shape[1:]) for i in range(e.get("minimax_refs", 0))
                ),
                f"{e['key']}.token_tags" in self.inputs,
                _shape(self.inputs.get(f"{e['key']}.t5xxl_ids")),  # Anima: its adapter's T5 ids stack by length
                _shape(self.inputs.get(f"{e['key']}.conditioning_llama3")),  # HiDream: its Llama states, by length
                _shape(self.inputs.get(f"{e['key']}.attention_mask")),  # LTX-Video: its text mask, by length
                _shape(self.inputs.get(f"{e['key']}.conditioning_byt5small")),  # Hunyuan Image: ByT5 states, by length
                _shape(self.inputs.get(f"{e['key']}.conditioning_mt5xl")),  # HunyuanDiT: mT5-XL states, by length
                # an entry with an edit image and one without never share a pass (ComfyUI's conds cannot concat)
                f"{e['key']}.concat_latent_image" in self.inputs,
                _shape(self.inputs.get(f"{e['key']}.time_dim_concat")),  # Wan Phantom: its subject frames
                tuple(_shape(self.inputs.get(f"{e['key']}.{n}")) for n in S2V_KEYS),  # Wan S2V's inputs
                _shape(self.inputs.get(f"{e['key']}.time_dim_replace")),  # Kandinsky 5: its start latent
                e.get("guiding_frame_index"),  # HunyuanVideo v2 (replace): token replacement per pass
                _shape(self.inputs.get(f"{e['key']}.ref_latent")),  # HunyuanVideo custom: its reference latent
                # LTX-2's reference audio: entries with and without it (identity guidance's pass) never share a pass
                _shape(self.inputs.get(f"{e['key']}.ref_audio")) if e.get("ref_audio") else None,
                gligen.group_key(e),  # GLIGEN's layers run for its entries only
                _animate2_key(self.inputs, e),  # Wan Animate 2: pose branch inputs and strengths
                _scail_key(self.inputs, e),  # Wan SCAIL-2: identity masks and mode
                tuple(  # Bernini: its context latents (ComfyUI's CONDList concatenates only equal shapes)
                    _shape(self.inputs[f"{e['key']}.context_latent.{i}"]) for i in range(e.get("context_latents", 0))
                ),
                self._cascade_tokens(e),  # Stable Cascade stage C: entries with as many image tokens share a pass
            )
            groups.setdefault(gkey, []).append((side, e, area, mult))
        xc = self.ms.calculate_input(sigma, x)
        t = self.ms.timestep(sigma)
        n = x.shape[0]
        evaluation: dict[str, Any] = {}  # what the passes of this evaluation share (EasyCache's skip decision)
        totals = {name: torch.zeros_like(x) for name, _ in sides}
        counts = {name: torch.ones_like(x) * 1e-37 for name, _ in sides}
        for members in groups.values():
            k = len(members)
            xb = torch.cat([crop(xc, area) for _, _, area, _ in members])
            tb = t.reshape(-1)[:1].expand(n * k)
            if self.denoise_mask is not None:  # Wan 2.2 5B: one timestep per latent frame from the noise mask
                tb = self.model.step_timesteps(tb, self.denoise_mask.repeat(k, *[1] * (self.denoise_mask.dim() - 1)))
                if self.model.reads_denoise_mask:
                    denoise_mask_b = self.denoise_mask.repeat(k, *[1] * (self.denoise_mask.dim() - 1))
            batch_cond = self._batch_cond([e for _, e, _, _ in members], n, x.device)
            if self.denoise_mask is not None and self.model.reads_denoise_mask:
                batch_cond["denoise_mask"] = denoise_mask_b
            if self.rope_options:
                batch_cond["rope_options"] = self.rope_options
            if self.uso:  # ComfyUI projects the states in every forward pass (its post_input patch)
                batch_cond["uso_tokens"] = self._uso_tokens(x.device)
            # the whole schedule, as ComfyUI's transformer_options["sample_sigmas"] (FLUX 3's flow-map model reads
            # the sigma each step jumps to from it)
            # absent where a model is evaluated outside a sampling loop; left out for the networks that never read
            # it, so steps on different schedules share their forward passes (nodes.modelfns.shared_forward)
            if "sigmas" in self.inputs and self.model.reads_schedule:
                batch_cond["sample_sigmas"] = self.inputs["sigmas"]
            if self.latent_shapes is not None:  # LTX-2: where x's video and audio parts are
                batch_cond["latent_shapes"] = self.latent_shapes
            concats = [
                self.model.concat_image(
                    self.inputs.get(f"{e['key']}.concat_latent_image"),
                    x,
                    self.inputs.get(f"{e['key']}.concat_mask"),
                    e.get("concat_mask_index", 0),
                )
                for _, e, _, _ in members
            ]
            if concats[0] is not None:  # InstructPix2Pix: the image latent joins the input, cropped like it
                batch_cond["concat"] = torch.cat([crop(c, m[2]) for c, m in zip(concats, members)])
            vace = self._vace([e for _, e, _, _ in members], x)
            if vace is not None:  # Wan VACE: control latents and masks beside the latent
                batch_cond["vace_context"] = vace
                batch_cond["vace_strength"] = members[0][1].get("vace_strength", [1.0])
            batch_cond["control"] = self._control([e for _, e, _, _ in members], n, xb, tb, s, batch_cond)
            if members[0][1].get("gligen"):  # GLIGEN's object tokens for the group's text boxes, on its crop
                batch_cond["gligen"] = gligen.step_objects(members[0][1], self.inputs, self.load_control, xb)
            forward = partial(
                apply_model,
                self._model_for(members[0][1], x.device),
                self.patches,
                t=tb,
                cond=batch_cond,
                sigma=sigma,
                cond_or_uncond=[int(m[0]) for m in members],
            )
            if self.diffsynth:
                forward = self._with_diffsynth(forward, members[0][1], x.device, float(sigma.reshape(-1).max()))
            if self.infinitetalk:
                forward = self._with_infinitetalk(forward, members[0][1], x.device)
            out = wrap_forward(
                self.patches, forward, xb, sigma, [e["key"] for _, e, _, _ in members], self.state, evaluation
            )
            # ComfyUI accumulates a batch from its last member to its first; the order rounds overlaps.
            for idx in reversed(range(k)):
                side, _, area, mult = members[idx]
                denoised = self.ms.calculate_denoised(sigma, out[idx * n : (idx + 1) * n], crop(x, area))
                crop(totals[side], area).add_(denoised * mult)
                crop(counts[side], area).add_(mult)
        results = {name: totals[name] / counts[name] for name, _ in sides}
        return [results.get(str(k)) for k in range(len(sides_entries))]

    def _calc_cond_batch(
        self, model: Any, conds: list[list | None], x: torch.Tensor, sigma: torch.Tensor, model_options: dict
    ) -> list[torch.Tensor | None]:
        """ComfyUI's calc_cond_batch for patches: the sides' denoised predictions under other model_options
        (e.g. with an attention replaced)."""
        saved, self.patches = self.patches, model_options
        try:
            return self._predict(x, sigma, float(sigma.reshape(-1)[0]), conds)
        finally:
            self.patches = saved

    def _defaults(
        self, sides: list[tuple[str, list]], placed: list[tuple], s: float, x: torch.Tensor
    ) -> list[tuple[str, dict, tuple | None, torch.Tensor]]:
        """ComfyUI's finalize_default_conds: a side's "default" entries (ConditioningSetDefaultCombine) weigh
        what the side's other active entries leave uncovered, relu(1 - their summed weights), and are left
        out where that is zero everywhere."""
        out = []
        for side, entries in sides:
            chosen = [e for e in entries if e.get("default") and _active(s, e["sigma_start"], e["sigma_end"])]
            if not chosen:
                continue
            left = torch.ones_like(x)
            for other_side, _, area, mult in placed:
                if other_side == side:
                    crop(left, area).sub_(mult)
            torch.nn.functional.relu(left, inplace=True)
            if torch.max(left) == 0.0:
                continue
            for e in chosen:
                area, _ = area_and_mult(e, self.inputs.get(f"{e['key']}.mask"), x)
                out.append((side, e, area, crop(left, area)))
        return out

    def _with_diffsynth(self, forward: Callable, entry: dict, device: torch.device, sigma: float) -> Callable:
        if self.diffsynth[0][0].arch == ANIMA_LLLITE:  # Anima LLLite: its encoder and adapters, in its sigma window
            lllites = [
                anima_lllite.StepControl(self.load_control(ref), self.inputs[f"diffsynth.{k}"], strength, *window)
                for k, (ref, strength) in enumerate(self.diffsynth)
                for window in [ref.option("sigma_window")]
            ]
            return anima_lllite.with_controls(forward, self._model_for(entry, device).module.dit, lllites, sigma)
        controls = [
            (self.load_control(ref), self.inputs[f"diffsynth.{k}"], strength)
            for k, (ref, strength) in enumerate(self.diffsynth)
        ]
        return diffsynth.with_controls(forward, self._model_for(entry, device).module, controls)

    def _with_infinitetalk(self, forward: Callable, entry: dict, device: torch.device) -> Callable:
        from nodes.modelfns import infinitetalk

        ref, scale, masked = self.infinitetalk
        patch = self.load_control(ref).to(device)
        if self._audio_tokens is None:  # the same every evaluation: projected once per step
            from nodes.models.wan_multitalk import audio_tokens

            with torch.no_grad():
                first, later = self.inputs["infinitetalk.first"], self.inputs["infinitetalk.later"]
                self._audio_tokens = audio_tokens(patch, first.to(device), later.to(device))
        masks = self.inputs["infinitetalk.masks"] > 0.5 if masked else None
        module = self._model_for(entry, device).module
        return infinitetalk.with_audio(forward, module, patch, self._audio_tokens, scale, masks)

    def _uso_tokens(self, device: torch.device) -> list[torch.Tensor]:
        with torch.no_grad():
            return [
                self.load_control(ref).to(device)(self.inputs[f"uso.{k}"].to(device)) for k, ref in enumerate(self.uso)
            ]

    def _model_for(self, entry: dict, device: torch.device) -> DiffusionModel:
        """The MODEL, or for an entry with weight hooks the MODEL with its hooks at this evaluation's strengths."""
        hooks = entry_hooks(entry)
        if not hooks or self.hook_weights is None:
            return self.model
        model = self.hook_weights.model(hooks)
        model.module.to(device)  # built beside the layer cache, like a ControlNet: it follows the step
        return model

    def _batch_cond(self, entries: list[dict], n: int, device: torch.device) -> dict[str, Any]:
        def stacked(suffix: str):
            ts = [self.inputs.get(f"{e['key']}.{suffix}") for e in entries]
            if any(t is None for t in ts):
                return None
            return torch.cat([t.expand(n, *t.shape[1:]) if t.shape[0] == 1 else t for t in ts])

        cond: dict[str, Any] = {"context": stacked("context"), "pooled": stacked("pooled")}
        clip_fea = stacked("clip_fea")
        if clip_fea is not None:  # CLIP vision states of an image-to-video cond (Wan 2.1)
            cond["clip_fea"] = clip_fea
        if self.model.arch == "hunyuan_video15":  # HunyuanVideo 1.5 reads the vision output's last layer
            cond["clip_fea_last"] = stacked("clip_fea_last")
        priors = [self.inputs.get(f"{e['key']}.stable_cascade_prior") for e in entries]
        present = next((p for p in priors if p is not None), None)
        if present is not None:  # Stable Cascade stage B: a cond without a prior has ComfyUI's zeros, which the
            # network resizes to the latent's cells: zeros of the present prior's size are the same input
            rows = [present[:1] * 0 if p is None else p for p in priors]
            cond["stable_cascade_prior"] = torch.cat(
                [p.expand(n, *p.shape[1:]) if p.shape[0] == 1 else p for p in rows]
            )
        audio = stacked("audio_embed")
        if audio is not None:  # Wan S2V: the audio encoder's layers, as its node bucketed them
            cond["audio_embed"] = audio.to(device)
        for name in S2V_KEYS[1:]:  # Wan S2V: motion and control latents, in model space (ComfyUI's process_latent_in)
            value = stacked(name)
            if value is not None:
                cond[name] = self.model.latent_format.process_in(value).to(device)
        subjects = stacked("time_dim_concat")
        if subjects is not None:  # Wan Phantom: subject latent frames after the video's, in model space
            cond["time_dim_concat"] = self.model.latent_format.process_in(subjects.to(device))
        start = stacked("time_dim_replace")
        if start is not None:  # Kandinsky 5: clean start latent frames, in model space (ComfyUI's process_latent_in)
            cond["time_dim_replace"] = self.model.latent_format.process_in(start.to(device))
        if entries[0].get("guiding_frame_index") is not None:  # HunyuanVideo's token replacement
            cond["guiding_frame_index"] = entries[0]["guiding_frame_index"]
        reference = stacked("ref_latent")
        if reference is not None:  # HunyuanVideo's reference latent, in model space (ComfyUI's process_latent_in)
            cond["ref_latent"] = self.model.latent_format.process_in(reference.to(device))
        camera = stacked("camera_conditions")
        if camera is not None:  # Wan Fun Camera: its control adapter's input
            cond["camera_conditions"] = camera
        cn_context = stacked("controlnet_context")
        if cn_context is not None:  # CLIPTextEncodeControlnet: what the ControlNets attend to
            cond["controlnet_context"] = cn_context
        if self.latent_size is not None and self.model.arch == "sdxl":  # the only family reading them
            ids = torch.tensor(
                [_time_ids(e, self.latent_size, getattr(self.model, "refiner", False)) for e in entries],
                dtype=torch.float32,
                device=device,
            )
            cond["time_ids"] = ids.repeat_interleave(n, dim=0)
        if self.latent_size is not None and self.model.arch == "pixart_alpha":  # its size micro-conditions
            rows = [_pixart_size(e, self.latent_size) for e in entries]
            cond["pixart_size"] = torch.tensor(rows, dtype=torch.float32, device=device).repeat_interleave(n, dim=0)
        if any(e.get("unclip") for e in entries):
            cond.update(self._unclip(entries, n, device))
        if self.model.arch == "svd":  # its ADM values per entry (ComfyUI's defaults where unset) and frame count
            rows = [e.get("svd_adm", SVD_DEFAULT_ADM) for e in entries]
            cond["svd_adm"] = torch.tensor(rows, dtype=torch.float32, device=device).repeat_interleave(n, dim=0)
            cond["num_video_frames"] = n
        cond.update(self.av_shifts)
        if entries[0].get("frame_rate") is not None:  # LTXVConditioning's frame rate (LTX-2's positions)
            cond["frame_rate"] = entries[0]["frame_rate"]
        if any(e.get("unprocessed_ltxav_embeds") for e in entries):  # LTX-2.5's text encoder's embeddings
            cond["unprocessed_ltxav_embeds"] = True
        keyframes = stacked("keyframe_idxs")
        if keyframes is not None:  # LTXVAddGuide's guide tokens' positions (LTX-2)
            cond["keyframe_idxs"] = keyframes
        if entries[0].get("ref_audio"):  # LTXVReferenceAudio's tokens: one row for the batch (ComfyUI's CONDConstant)
            cond["ref_audio"] = self.inputs[f"{entries[0]['key']}.ref_audio"].to(device)
        guidance = entries[0].get("guidance")
        if guidance is not None:  # FluxGuidance; a guidance-distilled model applies its default otherwise
            cond["guidance"] = float(guidance)
        elif entries[0].get("guidance_disabled"):  # FluxDisableGuidance: the model adds no guidance embedding
            cond["guidance_disabled"] = True
        if entries[0].get("ref_latents"):  # ReferenceLatent: in model space, as ComfyUI's process_latent_in
            fmt = self.model.latent_format
            cond["ref_latents"] = [
                fmt.process_in(stacked(f"ref.{i}")).to(device) for i in range(entries[0]["ref_latents"])
            ]
            cond["ref_latents_method"] = entries[0].get("ref_latents_method")
        if entries[0].get("context_latents"):  # Bernini: in model space, as ComfyUI's process_latent_in
            fmt = self.model.latent_format
            cond["context_latents"] = [
                fmt.process_in(stacked(f"context_latent.{i}")).to(device) for i in range(entries[0]["context_latents"])
            ]
        if entries[0].get("image_slots"):  # Qwen-Image 2.1: the references' places in the prompt's states
            cond["image_slots"] = entries[0]["image_slots"]
        frames = entries[0].get("keyframe_frames")
        if frames:  # MiniMax H3 first/last frames: each member's own latents, noised from the sampling seed
            cond["keyframes"] = [(stacked(f"keyframe.{i}"), frame) for i, frame in enumerate(frames)]
            cond["keyframe_seed"] = self.seed
        if entries[0].get("minimax_refs"):  # MiniMax H3 reference images: noised from the seed, as keyframes
            cond["minimax_refs"] = [stacked(f"minimax_ref.{i}") for i in range(entries[0]["minimax_refs"])]
            cond["keyframe_seed"] = self.seed
        for name in ANIMA_KEYS + HIDREAM_KEYS + TEXT_MASK_KEYS + BYT5_KEYS:  # T5 ids, Llama, a text mask, ByT5
            value = stacked(name)
            if value is not None:
                cond[name] = value
        seedvr2 = stacked("seedvr2_condition")
        if seedvr2 is not None:  # SeedVR2Conditioning's condition, raw: the model joins it to its input
            cond["condition"] = seedvr2.to(device)
        pose = stacked("pose_video_latent")
        if pose is not None:  # Wan Animate 2's pose branch, in model space (ComfyUI's process_latent_in)
            cond["pose_latents"] = self.model.latent_format.process_in(pose).to(device)
        for name in ("context_pose", "clip_fea_pose"):
            value = stacked(name)
            if value is not None:
                cond[name] = value
        for name in ("pose_strength", "reference_strength"):  # constants of the batch (ComfyUI's CONDConstant)
            if name in entries[0]:
                cond[name] = entries[0][name]
        for name in ("driving_mask_28ch", "ref_mask_28ch"):  # Wan SCAIL-2's identity masks
            value = stacked(name)
            if value is not None:
                cond[name] = value
        if "ref_mask_flag" in entries[0]:  # Wan SCAIL-2: animation or replacement (ComfyUI's CONDConstant)
            cond["ref_mask_flag"] = entries[0]["ref_mask_flag"]
        tags = stacked("token_tags")
        if tags is not None:  # MiniMax H3: the prompt rows an image's vision block fills are video rows
            cond["token_tags"] = tags
        return cond

    def _unclip(self, entries: list[dict], n: int, device: torch.device) -> dict[str, torch.Tensor]:
        """unCLIPConditioning's images as the UNet's ADM input, entry by entry from the sampling seed: SDXL's pooled
        slot, SD2.1 unCLIP's class embedding input (zeros for an entry without images); Stable Cascade stage C's image
        tokens. Other models ignore them, as ComfyUI's do."""
        if self.model.arch == "stable_cascade_c":
            return {"clip_img": self._cascade_clip_img(entries, n, device)}
        config = self.model.module.config
        unclip_sd2 = self.model.arch == "sd2" and getattr(config, "class_embed_type", None) == "projection"
        if self.model.arch != "sdxl" and not unclip_sd2:
            return {}
        rows = []
        for e in entries:
            images = [
                unclip.UnclipImage(self.inputs[f"{e['key']}.unclip.{i}"].to(device), strength, noise)
                for i, (strength, noise) in enumerate(e.get("unclip", ()))
            ]
            if not unclip_sd2:
                row = unclip.sdxl_pooled(images, self.seed) if images else self.inputs[f"{e['key']}.pooled"]
            elif images:
                width = config.projection_class_embeddings_input_dim
                row = unclip.unclip_adm(images, width // 2, self.seed, unclip.SD21_MERGE_LEVEL)
            else:
                row = torch.zeros(1, config.projection_class_embeddings_input_dim)
            row = row.to(device)
            rows.append(row.expand(n, *row.shape[1:]) if row.shape[0] == 1 else row)
        return {"pooled" if not unclip_sd2 else "adm": torch.cat(rows)}

    def _cascade_tokens(self, entry: dict) -> int | None:
        """How many image tokens stage C reads for an entry (ComfyUI's clip_img conds of other lengths cannot
        concat, so they run apart); None for other models."""
        if self.model.arch != "stable_cascade_c":
            return None
        rows = [self.inputs[f"{entry['key']}.unclip.{i}"].shape[0] for i in range(len(entry.get("unclip", ())))]
        return sum(rows) if rows else 1

    def _cascade_clip_img(self, entries: list[dict], n: int, device: torch.device) -> torch.Tensor:
        """Stable Cascade stage C's image tokens (ComfyUI's model_base.StableCascade_C): each unCLIPConditioning
        image's embeds times its strength, one token per image (no noise augmentation); zeros for an entry without."""
        width = self.model.config["clip_image_in_channels"]
        rows = []
        for e in entries:
            embeds = [
                self.inputs[f"{e['key']}.unclip.{i}"].to(device).float().unsqueeze(0) * strength
                for i, (strength, _) in enumerate(e.get("unclip", ()))
            ]
            row = torch.cat(embeds, dim=1) if embeds else torch.zeros(1, 1, width, device=device)
            rows.append(row.expand(n, *row.shape[1:]) if row.shape[0] == 1 else row)
        if len({r.shape[1] for r in rows}) > 1:
            raise ValueError(
                "Stable Cascade: prompts with different numbers of unCLIP images cannot share a step here yet"
            )
        return torch.cat(rows)

    def _vace(self, entries: list[dict], x: torch.Tensor) -> torch.Tensor | None:
        """A VACE model's control context for this batch, each entry's own (or the model's default)."""
        vace_context = getattr(self.model, "vace_context", None)
        if vace_context is None:
            return None
        parts = []
        for e in entries:
            count = len(e.get("vace_strength", ()))
            frames = [self.inputs[f"{e['key']}.vace.{i}.frames"] for i in range(count)]
            masks = [self.inputs[f"{e['key']}.vace.{i}.mask"] for i in range(count)]
            parts.append(vace_context(frames, masks, x))
        return None if parts[0] is None else torch.cat(parts)

    def _control(self, entries: list[dict], n: int, xb: torch.Tensor, tb: torch.Tensor, s: float, cond: dict[str, Any]):
        """Sum of the active ControlNets' residuals for this batch (a chain adds up, as in ComfyUI)."""
        total = None
        if "controlnet_context" in cond:
            cond = {**cond, "context": cond["controlnet_context"]}
        for k, spec in enumerate(entries[0]["controls"]):
            if not _active(s, spec["sigma_start"], spec["sigma_end"]):
                continue
            hints = [self.inputs[f"{e['key']}.control.{k}.hint"] for e in entries]
            hint = torch.cat([h.expand(n, *h.shape[1:]) if h.shape[0] == 1 else h for h in hints])
            net = self.load_control(spec["ref"])
            net.module.to(xb.device)  # loaded beside the layer cache: it follows the step to its device
            extras = [self.inputs.get(f"{e['key']}.control.{k}.extra") for e in entries]
            # Qwen-Image's Fun ControlNets run the main model's input layers (ComfyUI hands them its base model)
            base = {"base": self.model.module} if getattr(net, "reads_base_model", False) else {}
            if extras[0] is None:
                residuals = net.apply(xb, tb, cond, hint, spec["strength"], **base)
            else:  # an inpainting ControlNet's mask (ComfyUI's extra_concat), batched like the hints
                extra = torch.cat([x.expand(n, *x.shape[1:]) if x.shape[0] == 1 else x for x in extras])
                residuals = net.apply(xb, tb, cond, hint, spec["strength"], extra=extra, **base)
            total = residuals if total is None else total + residuals
        return total


def _animate2_key(inputs: dict[str, Any], e: dict) -> tuple:
    """What Wan Animate 2 entries must share to be one forward pass: the pose inputs' shapes and strengths."""
    shapes = tuple(
        _shape(inputs.get(f"{e['key']}.{n}")) for n in ("pose_video_latent", "context_pose", "clip_fea_pose")
    )
    return (*shapes, e.get("pose_strength"), e.get("reference_strength"))


def _scail_key(inputs: dict[str, Any], e: dict) -> tuple:
    """What Wan SCAIL-2 entries must share to be one forward pass: their masks' shapes and the mode."""
    return (
        *(_shape(inputs.get(f"{e['key']}.{n}")) for n in ("driving_mask_28ch", "ref_mask_28ch")),
        e.get("ref_mask_flag"),
    )


class DenoiseParams(Params):
    """One sampler step's parameters (what a KSampler, SamplerCustom or a pack's guider sends each step).
    Conditioning entries are nodes.conditioning.flatten's metadata, their tensors travel as inputs."""

    sampler: str  # a sampler of nodes.sampling.samplers by name
    seed: int  # the noise seed; ancestral and SDE samplers draw each step's noise from it
    cfg: float
    model_sampling: dict[str, Any]  # nodes.sampling.model_sampling's config of the MODEL
    step: int = 0  # the index in `sigmas` of the step to take
    image_size: tuple[int, int] | None = None  # pixels (height, width) of the latent
    positive: list[dict[str, Any]] = []
    negative: list[dict[str, Any]] = []
    middle: list[dict[str, Any]] | None = None  # PerpNeg's empty prompt / DualCFGGuider's second cond
    sampler_options: dict[str, Any] | None = None  # eta, s_noise, ... of the sampler-object nodes
    dual_cfg: dict[str, Any] | None = None  # DualCFGGuider's {cfg2, nested}
    perp_neg: dict[str, Any] | None = None  # PerpNegGuider's {neg_scale}
    hook_base: ModelRef | None = None  # the weights cond entries' hooks patch
    # model_options functions and patches (nodes.modelfns.model_patches.Patches): a node pack's functions,
    # so the call's opaque objects (cluster.call)
    model_patches: Any = None
    torch_compile: str | None = None  # TorchCompileModel's backend
    compute_dtype: str | None = None  # ModelComputeDtype's dtype name
    cfg_overrides: Any = ()  # CFGOverride's (sigma_low, sigma_high, cfg) ranges
    rope_options: dict[str, Any] | None = None  # ScaleROPE
    context_windows: dict[str, Any] | None = None  # ContextWindowsManual's fields
    uncond_model: ModelRef | None = None  # DualModelGuider's negative MODEL
    uncond_sampling: dict[str, Any] | None = None  # and its model sampling config
    latent_shapes: list[tuple[int, ...]] | None = None  # LTX-2: the video and audio latents packed side by side in x
    av_cfg: list[float] | None = None  # LTXVDualCFGGuider's [video cfg, audio cfg]
    cfg_side: str | None = None  # a CFG split's half: only this side's prediction (nodes.modelfns.cfg_split)
    diffsynth: Any = None  # QwenImageDiffsynthControlnet: ((MODEL_PATCH ref, strength), ...), inputs diffsynth.<k>
    uso: Any = None  # USOStyleReference: (MODEL_PATCH ref, ...), the SigLIP states as inputs uso.<k>
    infinitetalk: Any = None  # WanInfiniteTalkToVideo: (MODEL_PATCH ref, scale, masked), inputs infinitetalk.*


@dataclass(frozen=True)
class ModalityCfg:
    """A CFG function (noise space, ComfyUI's sampler_cfg_function arguments) with one scale for the packed
    latent's first `split` values per sample (the video) and another for the rest (the audio)."""

    video_cfg: float
    audio_cfg: float
    split: int

    def __call__(self, args: dict) -> torch.Tensor:
        cond, uncond = args["cond"], args["uncond"]
        out = uncond + (cond - uncond) * self.video_cfg
        out[..., self.split :] = uncond[..., self.split :] + (cond[..., self.split :] - uncond[..., self.split :]) * (
            self.audio_cfg
        )
        return out


def _pixart_size(entry: dict, latent_size: tuple[int, int]) -> list[float]:
    """PixArt-α's [height, width, aspect ratio]: CLIPTextEncodePixArtAlpha's size where it set both, else the
    image's (ComfyUI's model falls back to the latent's size in pixels and its height over width)."""
    size = entry.get("size", {})
    if "width" in size and "height" in size:
        return [size["height"], size["width"], size["height"] / size["width"]]
    return [latent_size[0], latent_size[1], latent_size[0] / latent_size[1]]


def _time_ids(entry: dict, latent_size: tuple[int, int], refiner: bool = False) -> list[float]:
    """SDXL's [height, width, crop_h, crop_w, target_height, target_width] from an entry's sizes (the refiner's
    last two: its aesthetic score); ComfyUI's defaults: the image size, no crop, the target the size, the
    aesthetic score by prompt type (a negative prompt's lower)."""
    size = entry.get("size", {})
    height, width = size.get("height", latent_size[0]), size.get("width", latent_size[1])
    crops = [height, width, size.get("crop_h", 0), size.get("crop_w", 0)]
    if refiner:
        side = "negative" if entry["key"].startswith("negative.") else "positive"
        return crops + [entry.get("aesthetic_score", REFINER_AESTHETIC[side])]
    return crops + [size.get("target_height", height), size.get("target_width", width)]


@register
class DenoiseStep(ModelFn):
    """inputs: x (model-space latent), sigmas, conds (`positive.j.context` ...), optional inpaint tensors and
    sampler state; params: a DenoiseParams."""

    name = "denoise_step"
    Params = DenoiseParams

    def __init__(self) -> None:
        super().__init__()
        self._controlnets: dict[str, Any] = {}
        self._hooked: dict[str, DiffusionModel] = {}
        self._unconds: dict[str, DiffusionModel] = {}
        self._samplings: dict[tuple, ModelSampling] = {}
        self._compiled: dict[tuple[int, str], tuple[torch.nn.Module, torch.nn.Module]] = {}
        self._cast: dict[tuple[int, str], tuple[torch.nn.Module, torch.nn.Module]] = {}

    def setup_io(self) -> None:
        self.add_input("x")
        self.add_input("sigmas")
        self.add_input("conditioning")  # the flattened `positive.*` / `negative.*` tensors
        self.add_input("control_hints", callback=True)
        self.add_output("x")
        self.add_output("denoised")
        self.add_output("state")
        self.add_output(cfg_split.PREDICTION)  # a CFG split's half gives only this

    @classmethod
    def batch_key(cls, call: Call) -> Hashable | None:
        """Steps of different requests share a batch when their model evaluations can share forward passes:
        the same weights (ModelRef: file, patches, strengths), compute dtype and compile backend, model
        sampling, the latent's dtype and shape past the batch, and the conditioning's layout (its tensors'
        names, dtypes and shapes past the batch). The sampler, its options and state, the schedule, step
        index, seed and CFG scale may all differ: `execute_batch` runs each step whole, as its own lane, and
        merges only the forward passes (nodes.modelfns.shared_forward). Not batched: MODELs patched by node
        packs or with guidance patches (their functions are code that may hold state across calls), steps
        with weight hooks or a second MODEL (DualModelGuider; their weights are per request), MiniMax H3
        steps with keyframes or references and unCLIP images (rows noised from each request's seed), GLIGEN text
        boxes and context windows."""
        p: DenoiseParams = call.params
        if (
            p.cfg_side is not None  # its point is another executor than the other side's
            or p.model_patches is not None
            or uses_hooks(p.positive, p.negative, p.middle)
            or any(
                e.get("keyframe_frames") or e.get("minimax_refs") or e.get("unclip") or e.get("gligen")
                for e in (*p.positive, *p.negative, *(p.middle or ()))
            )
            or p.uncond_model is not None
            or p.context_windows is not None
            or p.diffsynth is not None  # its control latents are per request
            or p.uso is not None  # its reference states are per request
            or p.infinitetalk is not None  # its audio is per request
            or call.ref is None
        ):
            return None
        x = call.inputs.get("x")
        if not isinstance(x, torch.Tensor) or x.ndim < 2:
            return None
        layout = []
        for name, t in sorted(call.inputs.items()):
            if name in ("x", "sigmas") or name.startswith(STATE_PREFIX):  # the sampler's own
                continue
            if t is not None and not isinstance(t, torch.Tensor):
                return None
            layout.append((name, None if t is None else (str(t.dtype), tuple(t.shape[1:]))))
        try:
            sampling = freeze(p.model_sampling)
        except TypeError:
            return None
        return (
            cls.name,
            call.ref.key,
            str(x.dtype),
            tuple(x.shape[1:]),
            sampling,
            p.compute_dtype,
            p.torch_compile,
            tuple(layout),
        )

    def execute_batch(self, model: DiffusionModel, calls: Sequence[Call]) -> list[dict[str, torch.Tensor]]:
        """Each call's step as a lane, their forward passes shared (nodes.modelfns.shared_forward): every
        output is the one `execute` gives the call alone, the network being batch-invariant."""
        results, _ = run_lanes([partial(self.execute, model, c.inputs, c.params) for c in calls])
        return results

    @classmethod
    def warm_up(cls) -> None:
        from nodes.models.loader import import_model_code

        import_model_code()

    def load_model(self, ref: ModelRef) -> DiffusionModel:
        from nodes.models.loader import load_diffusion_model

        return load_diffusion_model(ref)

    def load_control(self, ref: ModelRef):
        from nodes.models.gligen import load_gligen_ref
        from nodes.models.loader import load_controlnet
        from nodes.models.model_patch import load_model_patch

        if ref.key not in self._controlnets:
            if len(self._controlnets) >= 4:
                self._controlnets.pop(next(iter(self._controlnets)))
            load = {"model_patch": load_model_patch, "gligen": load_gligen_ref}.get(ref.component, load_controlnet)
            self._controlnets[ref.key] = load(on_this_machine(ref))
        return self._controlnets[ref.key]

    def _load_hooked(self, ref: ModelRef) -> DiffusionModel:
        """The MODEL with a hook group's weights at given strengths: a few kept, as a schedule revisits
        the same strengths step after step."""
        if ref.key not in self._hooked:
            if len(self._hooked) >= 2:
                self._hooked.pop(next(iter(self._hooked)))
            self._hooked[ref.key] = self.load_model(on_this_machine(ref))
        return self._hooked[ref.key]

    def _load_uncond(self, ref: ModelRef) -> DiffusionModel:
        """DualModelGuider's negative MODEL: one kept (a sampling run asks for the same one every step)."""
        if ref.key not in self._unconds:
            self._unconds.clear()
            self._unconds[ref.key] = self.load_model(on_this_machine(ref))
        return self._unconds[ref.key]

    def _model_sampling(self, config: dict[str, Any]) -> ModelSampling:
        """One per config: building the 1000-entry sigma tables on every step cost more than the step's
        arithmetic. Samplers only read them."""
        key = tuple(sorted(config.items()))
        if key not in self._samplings:
            self._samplings[key] = model_sampling_from_config(config)
        return self._samplings[key]

    def _compile(self, model: DiffusionModel, backend: str) -> DiffusionModel:
        """TorchCompileModel: the loaded network compiled once per (network, backend) and reused by every
        later step (torch.compile's own guards decide when a new shape needs another graph). A few kept, as
        with the hooked models; each entry holds its network, so an id is never mistaken for another's."""
        key = (id(model.module), backend)
        if key not in self._compiled or self._compiled[key][0] is not model.module:
            if len(self._compiled) >= 2:
                self._compiled.pop(next(iter(self._compiled)))
            self._compiled[key] = (model.module, torch.compile(model.module, backend=backend))
        compiled = copy.copy(model)  # the same DiffusionModel whose network is the compiled one
        compiled.module = self._compiled[key][1]
        return compiled

    def _in_dtype(self, model: DiffusionModel, dtype_name: str) -> DiffusionModel:
        """ModelComputeDtype: the loaded network copied and cast to `dtype_name` once per (network, dtype),
        the shared loaded module left as it is. The model casts its inputs to its dtype and its output back
        to the input's float32, as ComfyUI's model_base does with a compute dtype."""
        dtype = getattr(torch, dtype_name)
        if dtype == model.dtype:
            return model
        key = (id(model.module), dtype_name)
        if key not in self._cast or self._cast[key][0] is not model.module:
            if len(self._cast) >= 2:
                self._cast.pop(next(iter(self._cast)))
            self._cast[key] = (model.module, copy.deepcopy(model.module).to(dtype))
        cast = copy.copy(model)  # the same DiffusionModel with the cast network
        cast.module, cast.dtype = self._cast[key][1], dtype
        return cast

    def execute(self, model: DiffusionModel, inputs: dict[str, Any], params: DenoiseParams) -> dict[str, torch.Tensor]:
        if params.compute_dtype:
            model = self._in_dtype(model, params.compute_dtype)
        if params.torch_compile:
            model = self._compile(model, params.torch_compile)
        ms = self._model_sampling(params.model_sampling)
        x, sigmas, i = inputs["x"], inputs["sigmas"], params.step
        state = {k[len(STATE_PREFIX) :]: v for k, v in inputs.items() if k.startswith(STATE_PREFIX)}
        hooks = (
            HookWeights(params.hook_base, state, sigmas, self._load_hooked)
            if uses_hooks(params.positive, params.negative, params.middle)
            else None
        )
        sampler = get_sampler(params.sampler)
        uncond = None
        if params.uncond_model is not None:
            uncond = (self._load_uncond(params.uncond_model), self._model_sampling(params.uncond_sampling))
        denoiser = GuidedDenoiser(
            model,
            ms,
            inputs,
            params,
            self.load_control,
            state,
            keep_uncond=sampler.cfg_pp,
            hook_weights=hooks,
            uncond=uncond,
        )
        if params.cfg_side is not None:
            return {
                cfg_split.PREDICTION: denoiser.side_prediction(x, cfg_split.step_sigma(x, sigmas, i), params.cfg_side)
            }
        given = [inputs.get(cfg_split.given_name(side)) for side in cfg_split.SIDES]
        if all(t is not None for t in given):
            denoiser.given = cfg_split.GivenPredictions(x, cfg_split.step_sigma(x, sigmas, i), *given)
        denoiser = wrap_prediction(denoiser, denoiser.patches, state)  # LazyCache: around the whole prediction
        x_next = run_step(
            denoiser,
            x,
            sigmas,
            i,
            params.sampler,
            params.seed,
            state,
            model_sampling=ms if ms.is_const or sampler.reads_model_sampling else None,
            options=params.sampler_options,
        )
        result = {"x": x_next, "denoised": state.get(DENOISED, x_next)}
        result.update({STATE_PREFIX + k: v for k, v in state.items()})
        return result
