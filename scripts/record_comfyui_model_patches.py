"""Record what ComfyUI's model-patch nodes compute inside the network, on fixed small tensors, as a fixture.

Run inside ComfyUI's own environment (it imports ComfyUI's modules and runs their node code; nothing of
ComfyUI is copied here):

    cd <ComfyUI source> && PYTHONPATH=<site>:. OMP_NUM_THREADS=2 <ComfyUI venv>/bin/python \
        /work/main/scripts/record_comfyui_model_patches.py /work/main/tests/nodes/fixtures/comfyui_model_patches.json.xz <workspace>/models/checkpoints/sd1-tiny.safetensors

Each node is run on a stand-in MODEL (`Recorder`) whose clone() captures the patches the node registers
(output/input block patches, attention patches and replacements, post-CFG functions); the captured
functions are then called on seeded tensors. Inputs and outputs are stored as float32 (base64), so the
test can compare with a tight tolerance. PAG and SAG's post-CFG functions call calc_cond_batch; it is
replaced by a toy evaluator that records the model_options it was given.
"""

from __future__ import annotations

import sys

import torch
from comfyui_recording import b64, comfyui_on_cpu, sha256, write_json

OUT, CHECKPOINT = sys.argv[1:3]
comfyui_on_cpu()
import comfy.model_sampling  # noqa: E402
import comfy.patcher_extension  # noqa: E402
import comfy.samplers  # noqa: E402
from comfy_extras import (  # noqa: E402  # noqa: E402
    nodes_attention_multiply,
    nodes_easycache,
    nodes_freelunch,
    nodes_hypernetwork,
    nodes_hypertile,
    nodes_model_downscale,
    nodes_pag,
    nodes_sag,
    nodes_slg,
    nodes_tomesd,
)


class _Config:
    def __init__(self, model_channels: int) -> None:
        self.unet_config = {"model_channels": model_channels}


class Recorder:
    """Just enough of a ModelPatcher for the nodes' patch code: it records what they register."""

    def __init__(self, model_channels: int = 8) -> None:
        self.model = type("M", (), {"model_config": _Config(model_channels)})()
        self.model_options: dict = {"transformer_options": {}}
        self.patches: dict[str, list] = {}
        self.replace: dict[tuple, object] = {}
        self.post_cfg: list = []
        self.sampling = comfy.model_sampling.ModelSamplingDiscrete()

    def clone(self) -> Recorder:
        return self

    def get_model_object(self, name: str):
        assert name == "model_sampling"
        return self.sampling

    def _add(self, kind: str, fn) -> None:
        self.patches.setdefault(kind, []).append(fn)

    def set_model_output_block_patch(self, fn) -> None:
        self._add("output_block_patch", fn)

    def set_model_input_block_patch(self, fn) -> None:
        self._add("input_block_patch", fn)

    def set_model_input_block_patch_after_skip(self, fn) -> None:
        self._add("input_block_patch_after_skip", fn)

    def set_model_attn1_patch(self, fn) -> None:
        self._add("attn1_patch", fn)

    def set_model_attn2_patch(self, fn) -> None:
        self._add("attn2_patch", fn)

    def set_model_attn1_output_patch(self, fn) -> None:
        self._add("attn1_output_patch", fn)

    def set_model_attn1_replace(self, fn, block, number, transformer_index=None) -> None:
        self.replace[("attn1", block, number, transformer_index)] = fn

    def set_model_sampler_post_cfg_function(self, fn, disable_cfg1_optimization=False) -> None:
        self.post_cfg.append((fn, disable_cfg1_optimization))

    def set_model_sampler_calc_cond_batch_function(self, fn) -> None:
        self.calc_cond_batch_function = fn


def seeded(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def freeu_cases() -> list[dict]:
    cases = []
    for node, params in (
        (nodes_freelunch.FreeU, (1.1, 1.2, 0.9, 0.2)),
        (nodes_freelunch.FreeU_V2, (1.3, 1.4, 0.7, 0.3)),
    ):
        m = Recorder(model_channels=8)
        node().patch(m, *params)
        fn = m.patches["output_block_patch"][0]
        for k, (ch, size) in enumerate(((32, 4), (16, 6), (8, 4), (16, 5))):
            h, hsp = seeded(10 + k, 2, ch, size, size), seeded(20 + k, 2, ch, size, size)
            oh, ohsp = fn(h.clone(), hsp.clone(), {})
            cases.append(
                {
                    "node": node.__name__,
                    "params": params,
                    "model_channels": 8,
                    "h": b64(h),
                    "hsp": b64(hsp),
                    "out_h": b64(oh),
                    "out_hsp": b64(ohsp),
                }
            )
    return cases


def downscale_cases() -> list[dict]:
    cases = []
    for after_skip in (True, False):
        for down, up in (
            ("bicubic", "bicubic"),
            ("nearest-exact", "bilinear"),
            ("area", "bislerp"),
            ("bislerp", "nearest-exact"),
            ("bilinear", "area"),
        ):
            m = Recorder()
            params = {
                "block_number": 3,
                "downscale_factor": 1.7,
                "start_percent": 0.0,
                "end_percent": 0.35,
                "downscale_after_skip": after_skip,
                "downscale_method": down,
                "upscale_method": up,
            }
            nodes_model_downscale.PatchModelAddDownscale.execute(m, **params)
            kind = "input_block_patch_after_skip" if after_skip else "input_block_patch"
            inp, outp = m.patches[kind][0], m.patches["output_block_patch"][0]
            h = seeded(30, 1, 4, 11, 9)
            results = []
            for block, sigma in ((3, 14.0), (3, 2.0), (2, 14.0), (3, 14.6147)):
                out = inp(h.clone(), {"block": ("input", block), "sigmas": torch.tensor([sigma, sigma])})
                results.append({"block": block, "sigma": sigma, "out": b64(out)})
            small, skip = seeded(31, 1, 4, 6, 5), seeded(32, 1, 4, 11, 9)
            oh, ohsp = outp(small.clone(), skip.clone(), {})
            cases.append(
                {
                    "params": params,
                    "h": b64(h),
                    "input": results,
                    "small": b64(small),
                    "skip": b64(skip),
                    "out_h": b64(oh),
                    "out_hsp": b64(ohsp),
                    "sigma_start": float(m.sampling.percent_to_sigma(0.0)),
                    "sigma_end": float(m.sampling.percent_to_sigma(0.35)),
                }
            )
    return cases


def toy_calc(record: list):
    """calc_cond_batch stand-in: records the options and returns a function of x and the replacements."""

    def calc(model, conds, x, timestep, model_options):
        replace = model_options["transformer_options"].get("patches_replace", {})
        record.append({side: sorted(str(k) for k in blocks) for side, blocks in replace.items()})
        return [x * 0.5 + 0.25 * len(replace.get("attn1", {}))]

    return calc


def pag_cases() -> list[dict]:
    cases = []
    for scale in (3.0, 0.0, 1.5):
        m = Recorder()
        nodes_pag.PerturbedAttentionGuidance.execute(m, scale)
        fn, disable = m.post_cfg[0]
        record: list = []
        comfy.samplers.calc_cond_batch = toy_calc(record)
        x, cond, out = seeded(40, 1, 4, 5, 5), seeded(41, 1, 4, 5, 5), seeded(42, 1, 4, 5, 5)
        args = {
            "model": None,
            "cond_denoised": cond,
            "cond": [{}],
            "denoised": out,
            "sigma": torch.tensor([3.0]),
            "model_options": {"transformer_options": {}},
            "input": x,
        }
        result = fn(args)
        # The replacement itself, on q, k, v.
        q, k, v = seeded(43, 1, 6, 8), seeded(44, 1, 6, 8), seeded(45, 1, 6, 8)
        ((key, replacement),) = [(k_, f) for k_, f in record_replacements(scale).items()]
        cases.append(
            {
                "scale": scale,
                "disable_cfg1": disable,
                "x": b64(x),
                "cond_denoised": b64(cond),
                "denoised": b64(out),
                "result": b64(result),
                "calc_options": record,
                "replace_key": list(key),
                "replace_matches_v": bool(torch.equal(replacement(q, k, v, {}), v)),
            }
        )
    return cases


def record_replacements(scale: float) -> dict:
    """The attention replacement PAG puts into the options of its second model call."""
    captured: dict = {}

    def calc(model, conds, x, timestep, model_options):
        for blocks in model_options["transformer_options"]["patches_replace"].values():
            captured.update(blocks)
        return [x]

    m = Recorder()
    nodes_pag.PerturbedAttentionGuidance.execute(m, scale or 1.0)
    comfy.samplers.calc_cond_batch = calc
    t = torch.zeros(1, 1, 1, 1)
    m.post_cfg[0][0](
        {
            "model": None,
            "cond_denoised": t,
            "cond": [],
            "denoised": t,
            "sigma": t,
            "model_options": {"transformer_options": {}},
            "input": t,
        }
    )
    return captured


def transformer_options(m: Recorder, sigma: float) -> dict:
    """What ComfyUI's sampler hands its UNet: the captured patches, replacements and the step's sigmas."""
    replace: dict = {}
    for (which, block, number, index), fn in m.replace.items():
        replace.setdefault(which, {})[(block, number) if index is None else (block, number, index)] = fn
    return {
        "patches": dict(m.patches),
        "patches_replace": replace,
        "sigmas": torch.tensor([sigma, sigma]),
        "cond_or_uncond": [0, 1],
    }


# (case, node, its inputs besides the model, latent size): run through ComfyUI's own UNet on the demo weights.
UNET_CASES = [
    ("none", None, {}, 8),
    ("freeu", nodes_freelunch.FreeU, {"b1": 1.1, "b2": 1.2, "s1": 0.9, "s2": 0.2}, 8),
    ("freeu_v2", nodes_freelunch.FreeU_V2, {"b1": 1.3, "b2": 1.4, "s1": 0.7, "s2": 0.3}, 8),
    (
        "downscale_after_skip",
        nodes_model_downscale.PatchModelAddDownscale,
        {
            "block_number": 3,
            "downscale_factor": 2.0,
            "start_percent": 0.0,
            "end_percent": 0.6,
            "downscale_after_skip": True,
            "downscale_method": "bicubic",
            "upscale_method": "bislerp",
        },
        8,
    ),
    (
        "downscale_before_skip",
        nodes_model_downscale.PatchModelAddDownscale,
        {
            "block_number": 1,
            "downscale_factor": 2.0,
            "start_percent": 0.0,
            "end_percent": 0.6,
            "downscale_after_skip": False,
            "downscale_method": "area",
            "upscale_method": "bilinear",
        },
        8,
    ),
    (
        "downscale_odd",
        nodes_model_downscale.PatchModelAddDownscale,
        {
            "block_number": 2,
            "downscale_factor": 1.5,
            "start_percent": 0.0,
            "end_percent": 0.6,
            "downscale_after_skip": True,
            "downscale_method": "nearest-exact",
            "upscale_method": "bicubic",
        },
        12,
    ),
    ("pag_replacement", nodes_pag.PerturbedAttentionGuidance, {"scale": 3.0}, 8),
    (
        "hypertile",
        nodes_hypertile.HyperTile,
        {"tile_size": 32, "swap_size": 1, "max_depth": 1, "scale_depth": False},
        16,
    ),
    (
        "hypertile_scaled",
        nodes_hypertile.HyperTile,
        {"tile_size": 16, "swap_size": 1, "max_depth": 1, "scale_depth": True},
        16,
    ),
    ("tome", nodes_tomesd.TomePatchModel, {"ratio": 0.5}, 10),
    ("sag_replacement", nodes_sag.SelfAttentionGuidance, {"scale": 0.5, "blur_sigma": 2.0}, 8),
    ("hypernetwork", None, {"strength": 0.8}, 8),
]
HYPERNETWORK_STRENGTH = 0.8
GLOBAL_SEED = 77  # torch.manual_seed before each forward: ToMe draws its destinations from the global generator


def unet_cases(checkpoint: str) -> list[dict]:
    """ComfyUI's ldm UNet built for the demo SD1 model (model_channels 32, channel_mult (1, 2), one resnet per
    level, attention at level 0 and in the middle, 8 heads, context 32), its weights loaded from the demo
    checkpoint, evaluated with each node's patches in transformer_options."""
    import comfy.ops
    from comfy.ldm.modules.diffusionmodules.openaimodel import UNetModel
    from safetensors.torch import load_file

    prefix = "model.diffusion_model."
    weights = {k[len(prefix) :]: v for k, v in load_file(checkpoint).items() if k.startswith(prefix)}
    net = UNetModel(
        image_size=32,
        in_channels=4,
        model_channels=32,
        out_channels=4,
        num_res_blocks=1,
        dropout=0,
        channel_mult=(1, 2),
        num_heads=8,
        use_spatial_transformer=True,
        transformer_depth=[1, 0],
        transformer_depth_middle=1,
        transformer_depth_output=[1, 1, 0, 0],
        context_dim=32,
        use_linear_in_transformer=False,
        dtype=torch.float32,
        device="cpu",
        operations=comfy.ops.disable_weight_init,
    )
    net.load_state_dict(weights, strict=True)
    digest = sha256(checkpoint)
    cases = []
    for name, node, params, size in UNET_CASES:
        m = Recorder(model_channels=32)
        if name == "hypernetwork":
            patch = nodes_hypernetwork.load_hypernetwork_patch(HYPERNETWORK_FILE, HYPERNETWORK_STRENGTH)
            m.patches.update(attn1_patch=[patch], attn2_patch=[patch])
        elif node is nodes_pag.PerturbedAttentionGuidance:  # only its attention replacement, as in its 2nd call
            m.replace.update({("attn1",) + tuple(k) + (None,): f for k, f in record_replacements(3.0).items()})
        elif node is not None:
            run = getattr(node, "execute", None) or node().patch
            run(m, **params)
        x, ctx = seeded(50, 2, 4, size, size), seeded(51, 2, 7, 32)
        t = torch.tensor([600.0, 600.0])
        torch.manual_seed(GLOBAL_SEED)
        with torch.no_grad():
            out = net(x, timesteps=t, context=ctx, transformer_options=transformer_options(m, 10.0))
        node_name = "HypernetworkLoader" if name == "hypernetwork" else node.__name__ if node else None
        cases.append(
            {
                "case": name,
                "node": node_name,
                "params": params,
                "x": b64(x),
                "t": 600.0,
                "sigma": 10.0,
                "context": b64(ctx),
                "out": b64(out),
            }
        )
    return [{"checkpoint_sha256": digest, "global_seed": GLOBAL_SEED, "cases": cases}]


def attention_patch_cases() -> dict:
    """HyperTile's and ToMe's attn1 patch and output patch on seeded tokens (the output patch is given the
    patched queries, standing in for the attention output, so both directions are checked)."""
    hypertile = []
    for params, shape in (
        ({"tile_size": 32, "swap_size": 1, "max_depth": 0, "scale_depth": False}, [2, 4, 16, 16]),
        ({"tile_size": 64, "swap_size": 1, "max_depth": 2, "scale_depth": True}, [1, 4, 32, 16]),
        ({"tile_size": 8, "swap_size": 1, "max_depth": 1, "scale_depth": False}, [1, 4, 24, 16]),
        ({"tile_size": 256, "swap_size": 1, "max_depth": 0, "scale_depth": False}, [1, 4, 16, 16]),
    ):
        m = Recorder()
        nodes_hypertile.HyperTile.execute(m, **params)
        tile_in, tile_out = m.patches["attn1_patch"][0], m.patches["attn1_output_patch"][0]
        h, w = shape[-2:]
        for depth in range(params["max_depth"] + 2):
            q = seeded(60 + depth, shape[0], (h >> depth) * (w >> depth), 8)
            tq, _, _ = tile_in(q.clone(), q, q, {"original_shape": shape})
            back = tile_out(tq * 2.0, {})
            hypertile.append({"params": params, "shape": shape, "q": b64(q), "tiled": b64(tq), "back": b64(back)})
    tome = []
    for ratio, shape, seed in (
        (0.5, [2, 4, 8, 8], 1),
        (0.3, [1, 4, 10, 6], 2),
        (0.9, [1, 4, 7, 9], 3),
        (0.5, [1, 4, 8, 8], 4),
    ):
        m = Recorder()
        nodes_tomesd.TomePatchModel.execute(m, ratio)
        merge, unmerge = m.patches["attn1_patch"][0], m.patches["attn1_output_patch"][0]
        for tokens in (shape[-2] * shape[-1], (shape[-2] // 2) * (shape[-1] // 2)):
            q = seeded(70 + seed, shape[0], tokens, 8)
            torch.manual_seed(seed)
            mq, _, _ = merge(q.clone(), q, q, {"original_shape": shape})
            back = unmerge(mq * 2.0 + 1.0, {})
            tome.append(
                {"ratio": ratio, "shape": shape, "seed": seed, "q": b64(q), "merged": b64(mq), "back": b64(back)}
            )
    return {"hypertile": hypertile, "tome": tome}


class WeightRecorder:
    """A MODEL / CLIP stand-in for the attention-multiply nodes: its state dict's key names, and the
    (strength_patch, strength_model) each add_patches call gives a key."""

    def __init__(self, keys: list[str]) -> None:
        self.keys = keys
        self.patcher = self
        self.added: dict[str, list] = {}

    def clone(self) -> WeightRecorder:
        return self

    def model_state_dict(self) -> dict:
        return dict.fromkeys(self.keys)

    def add_patches(self, patches: dict, strength_patch: float, strength_model: float) -> None:
        for key, value in patches.items():
            assert value == (None,)
            self.added.setdefault(key, []).append([strength_patch, strength_model])


def attention_multiply_cases(checkpoint: str) -> dict:
    """ComfyUI's key names for the demo SD1 model (its UNet, plus temporal layers as a video UNet names them)
    and its CLIP, and the weight patches each node adds to them."""
    from safetensors import safe_open

    with safe_open(checkpoint, "pt") as f:
        names = list(f.keys())
    unet = [
        "diffusion_model." + k[len("model.diffusion_model.") :] for k in names if k.startswith("model.diffusion_model.")
    ]
    unet += [k.replace(".transformer_blocks.0.", ".time_stack.0.") for k in unet if ".transformer_blocks.0.attn" in k]
    clip = [
        "clip_l.transformer." + k[len("cond_stage_model.transformer.") :]
        for k in names
        if k.startswith("cond_stage_model.transformer.")
    ]
    n = nodes_attention_multiply
    runs = [
        ("UNetSelfAttentionMultiply", unet, (1.1, 1.2, 1.3, 0.9)),
        ("UNetCrossAttentionMultiply", unet, (0.8, 1.0, 1.5, 2.0)),
        ("UNetTemporalAttentionMultiply", unet, (1.1, 1.2, 1.3, 0.9)),
        ("CLIPAttentionMultiply", clip, (1.1, 1.2, 0.7, 0.9)),
    ]
    cases = []
    for node, keys, factors in runs:
        m = WeightRecorder(keys)
        getattr(n, node).execute(m, *factors)
        cases.append({"node": node, "factors": factors, "keys": keys, "patches": m.added})
    return {"cases": cases}


def sag_cases() -> list[dict]:
    """SAG's attention replacement on seeded projections (batch: positive, negative), then its post-CFG function
    with a toy calc_cond_batch (0.5 x + 0.1) that records the latent it was given."""
    cases = []
    for scale, blur_sigma, size in ((0.5, 2.0, 12), (1.5, 0.7, 12), (-1.0, 3.0, 8), (0.5, 2.0, 4)):
        m = Recorder()
        nodes_sag.SelfAttentionGuidance.execute(m, scale, blur_sigma)
        ((key, replacement),) = m.replace.items()
        post, disable = m.post_cfg[0]
        tokens = (size // 4) ** 2
        q, k, v = seeded(80, 2, tokens, 16), seeded(81, 2, tokens, 16), seeded(82, 2, tokens, 16)
        attn_out = replacement(q, k, v, {"n_heads": 2, "cond_or_uncond": [0, 1], "attn_precision": None})
        seen: list = []

        def calc(model, conds, x, timestep, model_options):
            seen.append(x.clone())
            return [x * 0.5 + 0.1]

        comfy.samplers.calc_cond_batch = calc
        x, uncond, out = (seeded(83 + i, 1, 4, size, size) for i in range(3))
        result = post(
            {
                "model": None,
                "uncond_denoised": uncond,
                "uncond": [{}],
                "denoised": out,
                "sigma": torch.tensor([2.0]),
                "model_options": {},
                "input": x,
            }
        )
        cases.append(
            {
                "scale": scale,
                "blur_sigma": blur_sigma,
                "replace_key": [str(p) for p in key],
                "disable_cfg1": disable,
                "q": b64(q),
                "k": b64(k),
                "v": b64(v),
                "attn_out": b64(attn_out),
                "x": b64(x),
                "uncond_denoised": b64(uncond),
                "denoised": b64(out),
                "result": b64(result),
                "calc_input": b64(seen[0]) if seen else None,
            }
        )
    return cases


def dit_calc(record: list):
    """calc_cond_batch stand-in for SLG: records the skipped blocks; side i (not None) gives
    0.3 x + 0.1 * (number of skips) + i."""

    def calc(model, conds, x, timestep, model_options):
        blocks = model_options.get("transformer_options", {}).get("patches_replace", {}).get("dit", {})
        record.append(sorted(list(k) for k in blocks))
        assert all(f({"img": 1, "txt": 2}, {}) == {"img": 1, "txt": 2} for f in blocks.values())
        return [None if c is None else x * 0.3 + 0.1 * len(blocks) + i for i, c in enumerate(conds)]

    return calc


def slg_cases() -> dict:
    post, simple = [], []
    for double, single, rescale in (("7, 8, 9", "1;2", 0.0), ("0", "", 0.7), ("", "3 4", 1.5), ("", "", 0.0)):
        for sigma in (10.0, 1.0, 14.5):
            m = Recorder()
            nodes_slg.SkipLayerGuidanceDiT.execute(m, 3.0, 0.01, 0.15, double, single, rescale)
            record: list = []
            comfy.samplers.calc_cond_batch = dit_calc(record)
            x, cond, out = seeded(90, 1, 4, 6, 6), seeded(91, 1, 4, 6, 6), seeded(92, 1, 4, 6, 6)
            result = (
                m.post_cfg[0][0](
                    {
                        "model": None,
                        "cond_denoised": cond,
                        "cond": [{}],
                        "denoised": out,
                        "sigma": torch.tensor([sigma]),
                        "input": x,
                        "model_options": {"transformer_options": {}},
                    }
                )
                if m.post_cfg
                else out
            )
            post.append(
                {
                    "double": double,
                    "single": single,
                    "rescaling_scale": rescale,
                    "sigma": sigma,
                    "patched": bool(m.post_cfg),
                    "x": b64(x),
                    "cond_denoised": b64(cond),
                    "denoised": b64(out),
                    "result": b64(result),
                    "calls": record,
                }
            )
            m = Recorder()
            nodes_slg.SkipLayerGuidanceDiTSimple.execute(m, 0.0, 0.5, double, single)
            fn = getattr(m, "calc_cond_batch_function", None)
            for with_uncond in (True, False):
                record = []
                comfy.samplers.calc_cond_batch = dit_calc(record)
                conds = [[{}], [{}] if with_uncond else None]
                outs = (
                    fn(
                        {
                            "input": x,
                            "model": None,
                            "conds": conds,
                            "sigma": torch.tensor([sigma]),
                            "model_options": {"transformer_options": {}},
                        }
                    )
                    if fn
                    else None
                )
                simple.append(
                    {
                        "double": double,
                        "single": single,
                        "sigma": sigma,
                        "with_uncond": with_uncond,
                        "patched": fn is not None,
                        "x": b64(x),
                        "calls": record,
                        "outs": None if outs is None else [None if o is None else b64(o) for o in outs],
                    }
                )
    m = Recorder()
    return {
        "post": post,
        "simple": simple,
        "sigma_start": float(m.sampling.percent_to_sigma(0.01)),
        "sigma_end": float(m.sampling.percent_to_sigma(0.15)),
    }


def tiny_hypernetwork(activation: str, layer_norm: bool, seed: int) -> dict:
    """A hypernetwork in A1111's format for the demo SD1 model's widths (32: level-0 self-attention and every
    cross-attention's context, 64: the middle block); the test builds the same file with the same code."""
    from collections import OrderedDict

    gen = torch.Generator().manual_seed(seed)

    def mlp(width: int) -> OrderedDict:
        sd, index = OrderedDict(), 0
        for a, b in ((width, width * 2), (width * 2, width)):
            sd[f"linear.{index}.weight"] = torch.randn(b, a, generator=gen) * 0.1
            sd[f"linear.{index}.bias"] = torch.randn(b, generator=gen) * 0.1
            index += 1
            if layer_norm:
                sd[f"linear.{index}.weight"] = 1 + torch.randn(b, generator=gen) * 0.1
                sd[f"linear.{index}.bias"] = torch.randn(b, generator=gen) * 0.1
                index += 1
        return sd

    return {
        32: [mlp(32), mlp(32)],
        64: [mlp(64), mlp(64)],
        "activation_func": activation,
        "is_layer_norm": layer_norm,
        "use_dropout": False,
        "activate_output": False,
        "last_layer_dropout": False,
    }


HYPERNETWORK_FILE = "/tmp/record_hypernetwork_unet.pt"
HYPERNETWORKS = [("relu", True, 0), ("tanh", False, 1), ("linear", True, 2), ("mish", False, 3)]


def hypernetwork_cases() -> list[dict]:
    torch.save(tiny_hypernetwork(*HYPERNETWORKS[0]), HYPERNETWORK_FILE)
    cases = []
    for activation, layer_norm, seed in HYPERNETWORKS:
        path = f"/tmp/record_hypernetwork_{seed}.pt"
        torch.save(tiny_hypernetwork(activation, layer_norm, seed), path)
        patch = nodes_hypernetwork.load_hypernetwork_patch(path, 0.7)
        for width, tokens in ((32, 5), (64, 3), (48, 2)):
            q, k, v = (seeded(100 + i + width, 2, tokens, width) for i in range(3))
            oq, ok, ov = patch(q, k, v, {})
            cases.append(
                {
                    "activation": activation,
                    "layer_norm": layer_norm,
                    "seed": seed,
                    "strength": 0.7,
                    "q": b64(q),
                    "k": b64(k),
                    "v": b64(v),
                    "out_q": b64(oq),
                    "out_k": b64(ok),
                    "out_v": b64(ov),
                }
            )
    return cases


def lazycache_cases() -> list[dict]:
    """LazyCache's predict-noise wrapper over a small Euler loop of a toy predictor (0.8 x + 0.05 sigma), as
    ComfyUI's node sets it up (holder cloned and its sigmas prepared per sampling run)."""
    ms = comfy.model_sampling.ModelSamplingDiscrete()
    sigmas = [float(v) for v in torch.linspace(14.0, 0.05, 13)] + [0.0]
    cases = []
    for threshold, start, end in ((0.2, 0.15, 0.95), (1.0, 0.0, 1.0), (0.05, 0.3, 0.8), (3.0, 0.1, 0.9)):
        m = Recorder()
        m.wrappers = {}
        m.add_wrapper_with_key = lambda kind, key, fn: m.wrappers.__setitem__(kind, fn)
        nodes_easycache.LazyCacheNode.execute(m, threshold, start, end, False)
        holder = m.model_options["transformer_options"]["easycache"].clone().prepare_timesteps(ms)
        wrapper = m.wrappers[comfy.patcher_extension.WrappersMP.PREDICT_NOISE]
        x = seeded(110, 1, 4, 16, 16) * sigmas[0]
        calls, outs = [], []
        for i in range(len(sigmas) - 1):
            sigma = torch.tensor([sigmas[i]])

            def executor(x_, t_, options_):
                calls.append(i)
                return x_ * 0.8 + 0.05 * t_.reshape(-1, 1, 1, 1)

            executor_obj = type("E", (), {"__call__": lambda self, *a, **k: executor(*a, **k)})()
            out = wrapper(executor_obj, x, sigma, {"transformer_options": {"easycache": holder}})
            outs.append(b64(out))
            x = out + (x - out) * (sigmas[i + 1] / sigmas[i])
        cases.append(
            {
                "reuse_threshold": threshold,
                "start_percent": start,
                "end_percent": end,
                "sigmas": sigmas,
                "x0": b64(seeded(110, 1, 4, 16, 16) * sigmas[0]),
                "model_calls": calls,
                "outs": outs,
                "skipped": holder.total_steps_skipped,
            }
        )
    return cases


def main(out_path: str, checkpoint: str) -> None:
    hypernetworks = hypernetwork_cases()  # also writes the file the UNet case uses
    data = {
        "comfyui": "0.3.64 (a125cd84b054a57729b5eecab930ca9408719832)",
        "recorded_by": "scripts/record_comfyui_model_patches.py",
        "torch": torch.__version__,
        "freeu": freeu_cases(),
        "downscale": downscale_cases(),
        "pag": pag_cases(),
        "unet": unet_cases(checkpoint)[0],
        "attention_multiply": attention_multiply_cases(checkpoint),
        **attention_patch_cases(),
        "sag": sag_cases(),
        "slg": slg_cases(),
        "lazycache": lazycache_cases(),
        "hypernetwork": {"unet_file": list(HYPERNETWORKS[0]), "cases": hypernetworks},
    }
    write_json(out_path, data)


if __name__ == "__main__":
    main(OUT, CHECKPOINT)
