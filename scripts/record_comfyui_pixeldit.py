"""Record what the newest ComfyUI's PixelDiT code computes on the tiny PixelDiT files (nodes/models/pixeldit_demo.py),
as the fixture tests/models/fixtures/comfyui_pixeldit.json.xz. No released ComfyUI that runs here has PixelDiT (it came
with ComfyUI's PR 14103, May 2026), so its modules are run at development time on top of upstream 0.10.0 (commit
79cdbc81 of hiddenswitch/ComfyUI, the base these recorders use); nothing of ComfyUI is copied here.

Run inside that ComfyUI's environment, after `comfy-cluster demo-models`, with a folder holding the newest
ComfyUI's files (from a checkout of a repository that carries PR 14103) under these names:
comfy_ldm_pixeldit_model.py, comfy_ldm_pixeldit_modules.py, comfy_text_encoders_pixeldit.py, comfy_sd1_clip.py
(its tokenizer honours the min_length PixelDiT pads to; 0.10.0's ignores it) and comfy_supported_models.py (only
PixelDiTT2I.process_unet_state_dict is taken from it, the published layout's conversion). The fixture was recorded
with them from the PhoenixCreation/ComfyUI-TPU snapshot of 2026-08-22 (a fork carrying upstream's PixelDiT, which
adds accelerator hooks that do nothing on the CPU; comfyanonymous/ComfyUI's snapshot was too large to fetch here):

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<site>:. OMP_NUM_THREADS=1 <venv>/bin/python \\
        /work/main/scripts/record_comfyui_pixeldit.py <fixture> <workspace> <folder of the newest files> \\
        /work/main/workflows_json/pixeldit_t2i.json

The one adaptation: 0.10.0's mmdit.TimestepEmbedder predates its max_period argument (PixelDiT passes 10), so the
newest model module gets a subclass that passes it on to 0.10.0's timestep_embedding, which takes it. ComfyUI's
PixDiT_T2I takes its sizes as arguments (its defaults are the released 1300M's); they are read from the file's
shapes here. Recorded: the text encoder's tokens and conditioning for several prompts through ComfyUI's CLIP
loader (comfy.sd.load_clip with the PixelDiT tokenizer and encoder as Gemma 2's target), and the transformer's raw
output on seeded inputs (batch of two, a short context, a size in part patches); and the shipped workflow (the
web UI's PixelDiT template on the tiny files) run node by node with 0.10.0's node classes, UNETLoader's MODEL being
0.10.0's BaseModel around the newest PixDiT_T2I with the newest supported_models.PixelDiTT2I's settings (FLOW at
shift 4, pixel latents), CLIPLoader's the CLIP above, ResolutionSelector (newer than 0.10.0) its size for the
shipped inputs, SaveImage replaced by what it would write.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import re
import sys
import types

import torch
from comfyui_recording import MAX_RECORDED_VALUES, b64, png_rgb, write_json

OUT, WORKSPACE, UPSTREAM, WORKFLOW = sys.argv[1:5]
sys.argv[1:] = ["--cpu"]
import comfy.cli_args

comfy.cli_args.args.cpu = True


def load_upstream(name: str, file: str):
    spec = importlib.util.spec_from_file_location(name, f"{UPSTREAM}/{file}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


load_upstream("comfy.sd1_clip", "comfy_sd1_clip.py")
import comfy.ldm.modules.diffusionmodules.mmdit as mmdit
import comfy.ops
import comfy.sd
import comfy.text_encoders.llama
import comfy.text_encoders.lumina2
import comfy.utils


class TimestepEmbedder(mmdit.TimestepEmbedder):
    def __init__(self, *args, max_period=10000, **kwargs):
        super().__init__(*args, **kwargs)
        self.max_period = max_period

    def forward(self, t, dtype, **kwargs):
        return self.mlp(
            mmdit.timestep_embedding(t, self.frequency_embedding_size, max_period=self.max_period).to(dtype)
        )


mmdit.TimestepEmbedder = TimestepEmbedder
# The checkout these files came from may carry an accelerator hook module (its calls are skipped on the CPU).
if "comfy.accelerator" not in sys.modules and importlib.util.find_spec("comfy.accelerator") is None:
    sys.modules["comfy.accelerator"] = types.ModuleType("comfy.accelerator")
import comfy.model_management

if not hasattr(comfy.model_management, "xla_enabled"):
    comfy.model_management.xla_enabled = lambda: False
load_upstream("comfy.ldm.pixeldit.modules", "comfy_ldm_pixeldit_modules.py")
pixeldit_model = load_upstream("comfy.ldm.pixeldit.model", "comfy_ldm_pixeldit_model.py")
pixeldit_te = load_upstream("comfy.text_encoders.pixeldit", "comfy_text_encoders_pixeldit.py")

COMMIT = "79cdbc81 + the newest comfy/ldm/pixeldit, comfy/text_encoders/pixeldit.py, comfy/sd1_clip.py"
DIT = "diffusion_models/pixeldit_tiny.safetensors"
TEXT_ENCODER = "text_encoders/gemma_2_2b_it_elm_tiny.safetensors"
PROMPTS = [
    "a cat on a red sofa",
    "low quality, worst quality, over-saturated, blurry, deformed, watermark",
    "",
    "   ",
    "a (red:1.3) cat, \\(escaped\\) parens",
    'Given a user prompt, generate an "Enhanced prompt" already: a dog',
    " ".join(f"word{i}" for i in range(400)),  # past 298 tokens: truncated
]
# (seed, pixel shape, context rows, timesteps in ComfyUI's model units)
CASES = {
    "one": (1, [1, 3, 32, 48], 300, [700.0]),
    "short_context": (2, [1, 3, 48, 32], 7, [300.0]),
    "batch_two": (3, [2, 3, 32, 32], 300, [900.0, 200.0]),
    "odd_size": (4, [1, 3, 40, 23], 300, [500.0]),  # not whole patches: ComfyUI pads (circular) and crops
}


def sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def upstream_process_unet_state_dict():
    """PixelDiTT2I.process_unet_state_dict of the newest comfy/supported_models.py, compiled alone."""
    tree = ast.parse(open(f"{UPSTREAM}/comfy_supported_models.py").read())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "PixelDiTT2I")
    fn = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "process_unet_state_dict")
    namespace: dict = {"torch": torch}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), "supported_models.py", "exec"), namespace)
    return namespace["process_unet_state_dict"]


def tiny_gemma_sizes(te: dict) -> None:
    head = comfy.text_encoders.llama.Gemma2_2B_Config.head_dim
    sizes = {
        "vocab_size": te["model.embed_tokens.weight"].shape[0],
        "hidden_size": te["model.embed_tokens.weight"].shape[1],
        "intermediate_size": te["model.layers.0.mlp.gate_proj.weight"].shape[0],
        "num_hidden_layers": len({k.split(".")[2] for k in te if k.startswith("model.layers.")}),
        "num_attention_heads": te["model.layers.0.self_attn.q_proj.weight"].shape[0] // head,
        "num_key_value_heads": te["model.layers.0.self_attn.k_proj.weight"].shape[0] // head,
    }
    config = comfy.text_encoders.llama.Gemma2_2B_Config
    comfy.text_encoders.llama.Gemma2_2B_Config = lambda **kw: config(**{**sizes, **kw})


def build_model(sd: dict) -> torch.nn.Module:
    sd = upstream_process_unet_state_dict()(None, sd)
    dim, patch_in = sd["s_embedder.proj.weight"].shape
    pixel_hidden, channels = sd["pixel_embedder.proj.weight"].shape

    def depth(name):
        return len({int(m.group(1)) for k in sd if (m := re.match(rf"{name}\.(\d+)\.", k))})

    model = pixeldit_model.PixDiT_T2I(
        in_channels=channels,
        num_groups=dim // sd["patch_blocks.0.attn.q_norm_x.weight"].shape[0],
        hidden_size=dim,
        pixel_hidden_size=pixel_hidden,
        pixel_attn_hidden_size=sd["pixel_blocks.0.compress_to_attn.weight"].shape[0],
        pixel_num_groups=sd["pixel_blocks.0.compress_to_attn.weight"].shape[0]
        // sd["pixel_blocks.0.attn.q_norm.weight"].shape[0],
        patch_depth=depth("patch_blocks"),
        pixel_depth=depth("pixel_blocks"),
        patch_size=int(round((patch_in // channels) ** 0.5)),
        txt_embed_dim=sd["y_embedder.proj.weight"].shape[1],
        txt_max_length=sd["y_pos_embedding"].shape[1],
        dtype=torch.float32,
        operations=comfy.ops.disable_weight_init,
    )
    missing, unexpected = model.load_state_dict(sd, strict=True)
    assert not missing and not unexpected
    return model.eval()


# ResolutionSelector (newer than 0.10.0): 1:1 at 0.1 megapixels is sqrt(0.1 * 1024 * 1024) = 323.8 rounded to 320
RESOLUTION = {("1:1 (Square)", 0.1, 8, 256): (320, 320)}


def model_patcher(sd: dict):
    """0.10.0's BaseModel (FLOW) around the newest PixDiT_T2I, configured as supported_models.PixelDiTT2I."""
    import comfy.latent_formats
    import comfy.model_base
    import comfy.model_patcher
    import comfy.supported_models_base

    network = build_model(sd)

    class PixelDiTConfig(comfy.supported_models_base.BASE):
        unet_extra_config = {}
        sampling_settings = {"shift": 4.0}
        latent_format = comfy.latent_formats.ChromaRadiance  # the newest PixelDiTPixel is ChromaRadiance's
        memory_usage_factor = 0.04
        supported_inference_dtypes = [torch.float32]

    config = PixelDiTConfig({"disable_unet_model_creation": True})
    model = comfy.model_base.BaseModel(config, model_type=comfy.model_base.ModelType.FLOW, device=torch.device("cpu"))
    model.diffusion_model = network
    return comfy.model_patcher.ModelPatcher(model, load_device=torch.device("cpu"), offload_device=torch.device("cpu"))


def run_workflow(prompt: dict, model, clip) -> dict:
    from comfy_extras import nodes_chroma_radiance

    import nodes

    classes = dict(nodes.NODE_CLASS_MAPPINGS)
    for cls in vars(nodes_chroma_radiance).values():
        if isinstance(cls, type) and cls.__module__ == nodes_chroma_radiance.__name__ and hasattr(cls, "define_schema"):
            classes[cls.define_schema().node_id] = cls
    results: dict[str, tuple] = {}

    def run(node_id: str) -> tuple:
        if node_id not in results:
            node = prompt[node_id]
            inputs = {k: run(v[0])[v[1]] if isinstance(v, list) else v for k, v in node["inputs"].items()}
            kind = node["class_type"]
            if kind == "SaveImage":
                results[node_id] = (inputs["images"],)
            elif kind == "ResolutionSelector":
                key = (inputs["aspect_ratio"], inputs["megapixels"], inputs["multiple"], inputs["minimum"])
                results[node_id] = RESOLUTION[key]
            elif kind == "UNETLoader":
                results[node_id] = (model,)
            elif kind == "CLIPLoader":
                results[node_id] = (clip,)
            else:
                cls = classes[kind]
                if hasattr(cls, "FUNCTION"):
                    results[node_id] = getattr(cls(), cls.FUNCTION)(**inputs)
                else:
                    out = cls.execute(**inputs)
                    results[node_id] = tuple(out.result) if hasattr(out, "result") else out
        return results[node_id]

    (save,) = [k for k, v in prompt.items() if v["class_type"] == "SaveImage"]
    return {"prompt": prompt, "pngs_rgb": [png_rgb(im, MAX_RECORDED_VALUES) for im in run(save)[0]]}


def main() -> None:
    torch.set_num_threads(1)
    te_path = f"{WORKSPACE}/models/{TEXT_ENCODER}"
    tiny_gemma_sizes(comfy.utils.load_torch_file(te_path))
    # ComfyUI's CLIP loader reads a Gemma 2 file as Lumina 2's; PixelDiT's tokenizer and encoder in its place
    comfy.text_encoders.lumina2.te = pixeldit_te.pixeldit_te
    comfy.text_encoders.lumina2.LuminaTokenizer = pixeldit_te.PixelDiTGemma2Tokenizer
    clip = comfy.sd.load_clip(ckpt_paths=[te_path], clip_type=comfy.sd.CLIPType.LUMINA2)
    out = {
        "comfyui_commit": COMMIT,
        "recorded_by": "scripts/record_comfyui_pixeldit.py",
        "files": {p: sha256(f"{WORKSPACE}/models/{p}") for p in (DIT, TEXT_ENCODER)},
        "text": [],
        "cases": {},
    }
    for prompt in PROMPTS:
        tokens = clip.tokenize(prompt)
        cond, _pooled = clip.encode_from_tokens(tokens, return_pooled=True)
        ids = [int(t) for t, *_ in tokens["gemma2_2b"][0]]
        out["text"].append({"prompt": prompt, "ids": ids, "cond": b64(cond)})
    model = build_model(comfy.utils.load_torch_file(f"{WORKSPACE}/models/{DIT}"))
    for name, (seed, shape, rows, t) in CASES.items():
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(shape, generator=g)
        context = torch.randn(1, rows, model.txt_embed_dim, generator=g).expand(shape[0], -1, -1)
        with torch.no_grad():
            y = model(x, torch.tensor(t), context=context)
        out["cases"][name] = {"out": b64(y)}
    prompt = json.loads(open(WORKFLOW).read())
    patcher = model_patcher(comfy.utils.load_torch_file(f"{WORKSPACE}/models/{DIT}"))
    out["workflow"] = run_workflow(prompt, patcher, clip)
    write_json(OUT, out)


if __name__ == "__main__":
    main()
