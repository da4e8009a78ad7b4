"""Record what ComfyUI 0.3.64 (commit a125cd84) computes for PhotoMaker on the tiny demo files, as the fixture
tests/nodes/fixtures/comfyui_photomaker.json.

Run inside that ComfyUI's own environment (nothing of ComfyUI is copied here), after `comfy-cluster demo-models`:

    cd <ComfyUI 0.3.64 source> && PYTHONPATH=<shim>:.:/work/main/scripts OMP_NUM_THREADS=1 <venv>/bin/python \\
        /work/main/scripts/record_comfyui_photomaker.py <fixture> <workspace> /work/main/workflows_json/photomaker.json

ComfyUI 0.3.64 fixes the released sizes (PhotoMaker's ViT-L tower, its 1024 -> 1280 second projection and
2048-wide fuse module; CLIP-L's and CLIP-G's configs; CLIP-G told by its 31st layer); this script gives those the
tiny files' sizes and changes nothing else: PhotoMakerLoader, PhotoMakerEncode (its trigger-word search, token
filter and class-token mask), comfy.clip_vision's preprocessing, the CLIP vision tower, the fuse module and the SDXL
text encoder (DualCLIPLoader type sdxl on the tiny real-vocabulary CLIP-L and CLIP-G) are ComfyUI's. Recorded:
PhotoMakerEncode's conditioning and pooled output for prompts with and without the trigger word, one whose word ids
make the filter drop tokens, on a seeded image; and the shipped workflow (a tiny SDXL UNet, given SDXL's model config
since its widths match none, with these text encoders and a tiny VAE whose sizes ComfyUI's autoencoder is given)
run node by node with 0.3.64's node classes, SaveImage replaced by what it would write.
"""

from __future__ import annotations

import json
import sys

import torch
from comfyui_recording import b64, comfyui_on_cpu, node_classes, run_node, run_prompt, sha256

OUT, WORKSPACE, WORKFLOW = sys.argv[1:4]
comfyui_on_cpu()
import comfy.ldm.modules.diffusionmodules.model as ldm_vae  # noqa: E402
import comfy.model_detection  # noqa: E402
import comfy.ops  # noqa: E402
import comfy.sd  # noqa: E402
import comfy.sdxl_clip  # noqa: E402
import comfy.supported_models  # noqa: E402
import comfy.utils  # noqa: E402
import folder_paths  # noqa: E402
from comfy import sd1_clip  # noqa: E402

COMMIT = "a125cd84"
FILES = {
    "photomaker": "photomaker/photomaker-v1-tiny.bin",
    "clip_l": "text_encoders/photomaker-tiny-clip_l.safetensors",
    "clip_g": "text_encoders/photomaker-tiny-clip_g.safetensors",
    "vae": "vae/photomaker-sdxl-vae-tiny.safetensors",
    "unet": "diffusion_models/photomaker-sdxl-unet-tiny.safetensors",
}
PROMPTS = [
    "photograph of a man photomaker",
    "a woman photomaker, portrait, soft light",
    "(x:1.1) (y:1.2) photomaker (w:1.1) z",  # 0.3.64's word ids are segments: word 3 ("y") is dropped
    "portrait photo of a man",  # no trigger: CLIPTextEncode's conditioning
]


def _count(sd: dict, prefix: str) -> int:
    return len({k[len(prefix) :].split(".")[0] for k in sd if k.startswith(prefix)})


def clip_config(sd: dict, hidden_act: str) -> dict:
    vocab, hidden = sd["text_model.embeddings.token_embedding.weight"].shape
    return {
        "hidden_act": hidden_act,
        "hidden_size": hidden,
        "intermediate_size": sd["text_model.encoder.layers.0.mlp.fc1.weight"].shape[0],
        "num_attention_heads": hidden // 8,  # the project's tiny CLIPs' 8-wide heads
        "projection_dim": sd["text_projection.weight"].shape[0],
        "vocab_size": vocab,
        "layer_norm_eps": 1e-5,
        "num_hidden_layers": _count(sd, "text_model.encoder.layers."),
        "max_position_embeddings": sd["text_model.embeddings.position_embedding.weight"].shape[0],
        "bos_token_id": 49406,
        "eos_token_id": 49407,
    }


def tiny_sizes() -> None:
    from comfy_extras import nodes_photomaker

    sds = {k: comfy.utils.load_torch_file(f"{WORKSPACE}/models/{FILES[k]}") for k in ("clip_l", "clip_g", "vae")}
    configs = {
        "sd1_clip_config.json": clip_config(sds["clip_l"], "quick_gelu"),
        "clip_config_bigg.json": clip_config(sds["clip_g"], "gelu"),
    }
    clip_init = sd1_clip.SDClipModel.__init__

    def clip_init_tiny(self, *args, textmodel_json_config=None, **kwargs):
        if textmodel_json_config is None:  # SDClipModel's default: CLIP-L's sd1_clip_config.json
            textmodel_json_config = "sd1_clip_config.json"
        if isinstance(textmodel_json_config, str):
            textmodel_json_config = dict(configs.get(textmodel_json_config.rsplit("/", 1)[-1], {})) or (
                textmodel_json_config
            )
        clip_init(self, *args, textmodel_json_config=textmodel_json_config, **kwargs)

    sd1_clip.SDClipModel.__init__ = clip_init_tiny
    g_width = sds["clip_g"]["text_model.final_layer_norm.weight"].shape[0]
    detect_te = comfy.sd.detect_te_model

    def detect_te_tiny(sd):  # ComfyUI tells CLIP-G by its 31st layer; the tiny one by its width
        w = sd.get("text_model.final_layer_norm.weight")
        if w is not None and w.shape[0] == g_width:
            return comfy.sd.TEModel.CLIP_G
        return detect_te(sd)

    comfy.sd.detect_te_model = detect_te_tiny

    def sdxl_load_sd_tiny(self, sd):  # SDXLClipModel routes CLIP-G by its 31st layer too
        w = sd.get("text_model.final_layer_norm.weight")
        return (self.clip_g if w is not None and w.shape[0] == g_width else self.clip_l).load_sd(sd)

    comfy.sdxl_clip.SDXLClipModel.load_sd = sdxl_load_sd_tiny

    pm = torch.load(f"{WORKSPACE}/models/{FILES['photomaker']}", weights_only=True)["id_encoder"]
    hidden = pm["vision_model.embeddings.class_embedding"].shape[0]
    nodes_photomaker.VISION_CONFIG_DICT = {
        **nodes_photomaker.VISION_CONFIG_DICT,
        "hidden_size": hidden,
        "intermediate_size": pm["vision_model.encoder.layers.0.mlp.fc1.weight"].shape[0],
        "num_hidden_layers": _count(pm, "vision_model.encoder.layers."),
        "projection_dim": pm["visual_projection.weight"].shape[0],
    }
    encoder_init = nodes_photomaker.PhotoMakerIDEncoder.__init__
    proj2 = pm["visual_projection_2.weight"].shape
    fuse = pm["fuse_module.layer_norm.weight"].shape[0]

    def encoder_init_tiny(self):
        encoder_init(self)
        self.visual_projection_2 = comfy.ops.manual_cast.Linear(proj2[1], proj2[0], bias=False)
        self.fuse_module = nodes_photomaker.FuseModule(fuse, comfy.ops.manual_cast)

    nodes_photomaker.PhotoMakerIDEncoder.__init__ = encoder_init_tiny

    # the tiny SDXL UNet matches no shipped model config (ComfyUI asks SDXL's widths): SDXL's, on the detected config
    match = comfy.model_detection.model_config_from_unet_config

    def match_tiny(unet_config, state_dict=None):
        found = match(unet_config, state_dict)
        return found if found is not None else comfy.supported_models.SDXL(unet_config)

    comfy.model_detection.model_config_from_unet_config = match_tiny
    vae = sds["vae"]
    vae_sizes = {
        "ch": vae["encoder.conv_in.weight"].shape[0],
        "ch_mult": [
            vae[f"encoder.down.{i}.block.0.conv1.weight"].shape[0] // vae["encoder.conv_in.weight"].shape[0]
            for i in range(_count(vae, "encoder.down."))
        ],
        "num_res_blocks": _count(vae, "encoder.down.0.block."),
    }
    for name in ("Encoder", "Decoder"):
        cls = getattr(ldm_vae, name)
        setattr(ldm_vae, name, lambda cls=cls, **kw: cls(**{**kw, **vae_sizes}))


def main() -> None:
    torch.set_num_threads(1)
    tiny_sizes()
    from comfy_extras import nodes_photomaker

    for folder in ("photomaker", "text_encoders", "vae", "diffusion_models"):
        folder_paths.add_model_folder_path(folder, f"{WORKSPACE}/models/{folder}", is_default=True)
    classes = node_classes(nodes_photomaker)
    (clip,) = run_node(
        classes["DualCLIPLoader"],
        {"clip_name1": FILES["clip_l"].split("/")[1], "clip_name2": FILES["clip_g"].split("/")[1], "type": "sdxl"},
    )
    (photomaker,) = run_node(classes["PhotoMakerLoader"], {"photomaker_model_name": FILES["photomaker"].split("/")[1]})
    image = torch.rand(1, 200, 160, 3, generator=torch.Generator().manual_seed(9))
    out = {
        "comfyui_commit": COMMIT,
        "recorded_by": "scripts/record_comfyui_photomaker.py",
        "files": {p: sha256(f"{WORKSPACE}/models/{p}") for p in FILES.values()},
        "image": {"seed": 9, "shape": [1, 200, 160, 3]},
        "encode": [],
    }
    for text in PROMPTS:
        ((cond, extra),) = run_node(
            classes["PhotoMakerEncode"], {"photomaker": photomaker, "image": image, "clip": clip, "text": text}
        )[0]
        out["encode"].append({"text": text, "cond": b64(cond), "pooled": b64(extra["pooled_output"])})
    folder_paths.set_input_directory(f"{WORKSPACE}/input")
    out["workflow"] = run_prompt(json.load(open(WORKFLOW)), classes)
    with open(OUT, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
