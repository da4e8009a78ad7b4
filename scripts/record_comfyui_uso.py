"""Record ComfyUI's USOStyleReference on the tiny demo files (FLUX.1 flux-tiny, sigclip-vision-tiny and the USO
projector uso-flux1-projector-v1-tiny), as a test fixture.

Run inside ComfyUI 0.3.64's own environment (it imports ComfyUI's modules; nothing of ComfyUI is copied here):

    cd <ComfyUI source> && PYTHONPATH=<shim>:. OMP_NUM_THREADS=2 <ComfyUI venv>/bin/python \\
        /work/main/scripts/record_comfyui_uso.py <models> /work/main/tests/nodes/fixtures/comfyui_uso.json

ComfyUI builds the released sizes, so its own classes are built with the demo's: ClipVisionModel from its SigLIP
config with the tiny widths (record_comfyui_siglip_redux.TINY_SIGLIP_CONFIG), SigLIPMultiFeatProjModel with 729
SigLIP tokens, 64 style tokens, width 32 and hidden width 32 (as its ModelPatchLoader builds it, manual_cast in the
file's dtype, the `feature_embedder.` prefix removed), and the Flux model with flux-tiny's hyperparameters (as
record_comfyui_edit_family.py builds it). Its USOStyleReference node patches a ModelPatcher of that Flux model with
the encoding of a fixed image (one reference, then a second one chained after it); the fixture holds the
projector's tokens for each reference and one forward pass of the Flux model on seeded inputs (batch 1, as the
node's tokens have) without the patch, with one and with both, run with the patched transformer_options.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from comfyui_recording import b64, comfyui_on_cpu, sha256  # noqa: E402
from record_comfyui_siglip_redux import SIGLIP_FILE, TINY_SIGLIP_CONFIG, images  # noqa: E402

USO_FILE = "model_patches/uso-flux1-projector-v1-tiny.safetensors"
FLUX_FILE = "diffusion_models/flux-tiny.safetensors"
SIGMA, GUIDANCE = 0.7, 3.5
CPU = torch.device("cpu")


def seeded(seed: int, *shape: int) -> torch.Tensor:
    """Shared with tests/nodes/test_uso.py: the forward pass's inputs."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def flux_inputs() -> dict[str, torch.Tensor]:
    return {"x": seeded(40, 1, 16, 6, 8), "context": seeded(41, 1, 5, 32), "y": seeded(42, 1, 32)}


def main(models: str, out_path: str) -> None:
    comfyui_on_cpu()
    import comfy.clip_vision
    import comfy.ldm.flux.model
    import comfy.model_patcher
    import comfy.ops
    import comfy.utils
    from comfy_extras import nodes_model_patch

    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(TINY_SIGLIP_CONFIG, f)
    vision = comfy.clip_vision.ClipVisionModel(f.name)
    vision.load_sd(comfy.utils.load_torch_file(os.path.join(models, SIGLIP_FILE)))
    references = {name: vision.encode_image(images()[name], crop=True) for name in ("wide", "square_384")}

    sd = comfy.utils.load_torch_file(os.path.join(models, USO_FILE), safe_load=True)
    dtype = comfy.utils.weight_dtype(sd)
    sd = comfy.utils.state_dict_prefix_replace(sd, {"feature_embedder.": ""}, filter_keys=True)
    projector = nodes_model_patch.SigLIPMultiFeatProjModel(
        siglip_token_nums=729,
        style_token_nums=64,
        siglip_token_dims=32,
        hidden_size=32,
        device=CPU,
        dtype=dtype,
        operations=comfy.ops.manual_cast,
    )
    projector.load_state_dict(sd)
    model_patch = comfy.model_patcher.ModelPatcher(projector, load_device=CPU, offload_device=CPU)

    flux = comfy.ldm.flux.model.Flux(
        in_channels=16,
        out_channels=16,
        vec_in_dim=32,
        context_in_dim=32,
        hidden_size=32,
        mlp_ratio=4.0,
        num_heads=2,
        depth=1,
        depth_single_blocks=2,
        axes_dim=[4, 4, 8],
        theta=10000,
        patch_size=2,
        qkv_bias=True,
        guidance_embed=True,
        operations=comfy.ops.disable_weight_init,
    )
    missing, unexpected = flux.load_state_dict(
        comfy.utils.load_torch_file(os.path.join(models, FLUX_FILE)), strict=False
    )
    assert not missing and not unexpected, (missing, unexpected)
    patcher = comfy.model_patcher.ModelPatcher(flux, load_device=CPU, offload_device=CPU)
    (one,) = nodes_model_patch.USOStyleReference().apply_patch(patcher, model_patch, references["wide"])
    (two,) = nodes_model_patch.USOStyleReference().apply_patch(one, model_patch, references["square_384"])

    inputs = flux_inputs()
    t, guidance = torch.tensor([SIGMA]), torch.tensor([GUIDANCE])
    record: dict = {
        "comfyui_commit": "a125cd84b054a57729b5eecab930ca9408719832",
        "recorded_by": "scripts/record_comfyui_uso.py (ComfyUI's ClipVisionModel, SigLIPMultiFeatProjModel, "
        "USOStyleReference node and Flux model, CPU)",
        "uso_sha256": sha256(os.path.join(models, USO_FILE)),
        "flux_sha256": sha256(os.path.join(models, FLUX_FILE)),
        "sigma": SIGMA,
        "guidance": GUIDANCE,
        "tokens": {},
        "forward": {},
    }
    with torch.no_grad():
        for name, patched in (("wide", one), ("square_384", two)):
            patch = patched.model_options["transformer_options"]["patches"]["post_input"][-1]
            record["tokens"][name] = b64(projector(patch.encoded_image.to(torch.float32)))
        for name, patched in (("plain", patcher), ("one", one), ("two", two)):
            options = patched.model_options.get("transformer_options", {})
            out = flux(inputs["x"], t, inputs["context"], inputs["y"], guidance, transformer_options=options)
            record["forward"][name] = b64(out)
    with open(out_path, "w") as f:
        json.dump(record, f, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    with torch.inference_mode():  # as ComfyUI's executor runs nodes
        main(sys.argv[1], sys.argv[2])
