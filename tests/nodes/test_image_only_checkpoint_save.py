"""ImageOnlyCheckpointSave (issue 39) checked against ComfyUI 0.3.64 on svd_xt-tiny (nodes/models/svd_demo.py): the file
it writes has the keys, shapes and metadata of the one ComfyUI writes for the same inputs, and every tensor's values
are ComfyUI's once cast to the dtype ComfyUI saved it in (it writes the dtypes it ran the models in, on a CPU float32
for the UNet, VAE and the encoder's layer norms; we keep the file's float16 and the encoder's float16) (tests/nodes/fixtures/comfyui_image_only_checkpoint_save.json.xz, recorded by
scripts/record_comfyui_image_only_checkpoint_save.py). ImageOnlyCheckpointLoader reads the saved file back to the
same model, image encoder and VAE."""

from __future__ import annotations

import asyncio
import hashlib
import shutil
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from nodes.loaders import make_ref
from nodes.models import loader
from nodes.models.svd_demo import FILE, build_demo_svd
from nodes.sampling.model_sampling import model_sampling_from_config
from tests.node_calls import active_workspace, call_node
from tests.recorded_tensors import load_json

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_image_only_checkpoint_save.json")
SAVED_AS = "svd-resaved.safetensors"


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """(workspace, path of the file ImageOnlyCheckpointSave wrote for the loader's outputs)."""
    torch.set_num_threads(1)
    for ws in active_workspace(tmp_path_factory.mktemp("svd-save-ws"), build_demo_svd):
        model, clip_vision, vae = asyncio.run(call_node("ImageOnlyCheckpointLoader", ckpt_name=FILE))
        asyncio.run(
            call_node(
                "ImageOnlyCheckpointSave",
                model=model,
                clip_vision=clip_vision,
                vae=vae,
                filename_prefix=FIXTURE["filename_prefix"],
            )
        )
        yield ws, ws.output_dir / FIXTURE["written"]


def _digest(t: torch.Tensor) -> str:
    return hashlib.sha256(t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()).hexdigest()


def test_the_source_is_the_recorded_file(saved) -> None:
    ws, _ = saved
    path = ws.models_dir / "checkpoints" / FILE
    assert hashlib.sha256(path.read_bytes()).hexdigest() == FIXTURE["files"][f"checkpoints/{FILE}"]


def test_the_saved_file_has_comfyuis_keys_shapes_values_and_metadata(saved) -> None:
    _, path = saved
    assert path.is_file(), f"ComfyUI names the file {FIXTURE['written']}"
    recorded = FIXTURE["keys"]
    with safe_open(str(path), "pt") as f:
        assert sorted(f.keys()) == sorted(recorded)
        for key, rec in recorded.items():
            t = f.get_tensor(key)
            assert list(t.shape) == rec["shape"], key
            assert _digest(t.to(getattr(torch, rec["dtype"]))) == rec["sha256"], key
        assert f.metadata() == FIXTURE["metadata"]


def test_the_loader_reads_the_saved_file_back_to_the_same_outputs(saved) -> None:
    ws, path = saved
    shutil.copy(path, ws.models_dir / "checkpoints" / SAVED_AS)
    original = asyncio.run(call_node("ImageOnlyCheckpointLoader", ckpt_name=FILE))
    resaved = asyncio.run(call_node("ImageOnlyCheckpointLoader", ckpt_name=SAVED_AS))
    assert all(r is not None for r in resaved)
    image = torch.rand(1, 40, 56, 3, generator=torch.Generator().manual_seed(1))
    (a,) = asyncio.run(call_node("CLIPVisionEncode", clip_vision=original[1], image=image, crop="center"))
    (b,) = asyncio.run(call_node("CLIPVisionEncode", clip_vision=resaved[1], image=image, crop="center"))
    assert torch.equal(a.image_embeds, b.image_embeds) and torch.equal(a.last_hidden_state, b.last_hidden_state)
    vaes = [loader.load_vae(refs[2]) for refs in (original, resaved)]
    torch.testing.assert_close(vaes[1].encode(image), vaes[0].encode(image), atol=0, rtol=0)
    latent = torch.randn(2, 4, 4, 6, generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(vaes[1].decode(latent), vaes[0].decode(latent), atol=0, rtol=0)
    denoised = []
    for refs in (original, resaved):
        model = loader.load_diffusion_model(refs[0])
        ms = model_sampling_from_config(model.sampling)
        x = torch.randn(2, 4, 4, 6, generator=torch.Generator().manual_seed(3))
        sigma = torch.full((2,), 3.0)
        cond = {
            "context": torch.randn(2, 1, 64, generator=torch.Generator().manual_seed(4)),
            "concat": model.concat_image(None, x),
            "svd_adm": torch.tensor([[6.0, 127.0, 0.0]]).expand(2, -1),
            "num_video_frames": 2,
        }
        with torch.no_grad():
            denoised.append(
                ms.calculate_denoised(sigma, model.apply(ms.calculate_input(sigma, x), ms.timestep(sigma), cond), x)
            )
    torch.testing.assert_close(denoised[1], denoised[0], atol=0, rtol=0)


def test_a_patched_model_or_another_family_is_refused_by_name(saved) -> None:
    """A LoRA'd SVD would need its patched weights (not written yet); other families are not SVD checkpoints."""
    from cluster.refs import Patch
    from nodes.models.errors import ModelLoadError

    ws, path = saved
    model = make_ref("diffusion_model", "svd", [ws.models_dir / "checkpoints" / FILE])
    with pytest.raises(ModelLoadError, match="LoRAs or merges"):
        asyncio.run(
            call_node(
                "ImageOnlyCheckpointSave",
                model=model.with_patch(Patch(str(path), "0" * 64, 0.5)),
                clip_vision=None,
                vae=None,
                filename_prefix="checkpoints/patched",
            )
        )
