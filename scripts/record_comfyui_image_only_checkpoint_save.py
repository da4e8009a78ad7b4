"""Record what ComfyUI 0.3.64 (commit a125cd84) writes for ImageOnlyCheckpointSave on the tiny SVD checkpoint
(checkpoints/svd_xt-tiny.safetensors, nodes/models/svd_demo.py), as tests/nodes/test_image_only_checkpoint_save.py
checks it (tests/nodes/fixtures/comfyui_image_only_checkpoint_save.json.xz).

Run inside that ComfyUI's own environment (nothing of ComfyUI is copied here), after `comfy-cluster demo-models`:

    cd <ComfyUI 0.3.64 source> && PYTHONPATH=<torchvision shim>:/work/main/scripts:. OMP_NUM_THREADS=1 \\
        <venv>/bin/python /work/main/scripts/record_comfyui_image_only_checkpoint_save.py <fixture> <workspace>

ImageOnlyCheckpointLoader loads the file (with record_comfyui_svd.py's tiny_sizes, which only tell ComfyUI the tiny
sizes) and ImageOnlyCheckpointSave writes it back. Recorded per key of the written file: shape, dtype and the sha256
of its bytes; and the file's metadata without the prompt (which is "" here)."""

from __future__ import annotations

import hashlib
import sys
import tempfile
from pathlib import Path

OUT, WORKSPACE = sys.argv[1:3]
import record_comfyui_svd as svd  # noqa: E402  (reads sys.argv[1:3] and sets ComfyUI's --cpu, as this script wants)
import torch  # noqa: E402
from comfyui_recording import node_classes, run_node, sha256, write_json  # noqa: E402

FILENAME_PREFIX = "checkpoints/svd_saved"


def tensor_digest(t: torch.Tensor) -> str:
    return hashlib.sha256(t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()).hexdigest()


def main() -> None:
    import comfy.utils
    import folder_paths
    from comfy_extras import nodes_video_model
    from safetensors import safe_open

    torch.set_num_threads(1)
    path = f"{WORKSPACE}/models/{svd.CHECKPOINT}"
    svd.tiny_sizes(comfy.utils.load_torch_file(path))
    folder_paths.add_model_folder_path("checkpoints", f"{WORKSPACE}/models/checkpoints", is_default=True)
    classes = node_classes(nodes_video_model)
    model, clip_vision, vae = run_node(classes["ImageOnlyCheckpointLoader"], {"ckpt_name": Path(path).name})
    with tempfile.TemporaryDirectory() as out_dir:
        saver = classes["ImageOnlyCheckpointSave"]()
        saver.output_dir = out_dir
        saver.save(model, clip_vision, vae, FILENAME_PREFIX)
        (written,) = Path(out_dir).rglob("*.safetensors")
        with safe_open(str(written), "pt") as f:
            metadata = dict(f.metadata() or {})
            keys = {
                k: {
                    "shape": list(f.get_tensor(k).shape),
                    "dtype": str(f.get_tensor(k).dtype).removeprefix("torch."),
                    "sha256": tensor_digest(f.get_tensor(k)),
                }
                for k in f.keys()
            }
        name = str(written.relative_to(out_dir))
    write_json(
        OUT,
        {
            "comfyui_commit": svd.COMMIT,
            "recorded_by": "scripts/record_comfyui_image_only_checkpoint_save.py",
            "files": {svd.CHECKPOINT: sha256(path)},
            "filename_prefix": FILENAME_PREFIX,
            "written": name,
            "metadata": metadata,
            "keys": keys,
        },
    )


if __name__ == "__main__":
    main()
