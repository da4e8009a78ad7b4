"""ComfyUI's dataset nodes (nodes/library/dataset.py): each transform, shuffle, deduplication, grid and resolution
bucket equals upstream ComfyUI 0.10.0's output (tests/nodes/fixtures/comfyui_dataset_nodes.json.xz, recorded by
scripts/record_comfyui_dataset_nodes.py); the folder loaders and savers run through the engine on a workspace.

Two places differ from 0.10.0 on purpose, as the newest ComfyUI source does or as the node plainly means: a batch
of several images is transformed frame by frame (0.10.0 fails on it), and a text transform outputs its text (0.10.0
wraps each result in a one-item Python list, which a downstream text input cannot take)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
from PIL import Image

from comfy_bridge import compat
from tests.nodes.engine_run import run_core_prompt

compat.install()
import nodes
from nodes.library import dataset
from tests.recorded_tensors import load_json

REPO = Path(__file__).resolve().parents[2]
FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_dataset_nodes.json.xz")


def _recorder():
    spec = importlib.util.spec_from_file_location(
        "record_dataset", REPO / "scripts" / "record_comfyui_dataset_nodes.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RECORDER = _recorder()


def _tensor(recorded: dict) -> torch.Tensor:
    return torch.tensor(recorded["values"]).reshape(recorded["shape"])


def _node(name: str):
    return nodes.NODE_CLASS_MAPPINGS[name]()


@pytest.mark.parametrize("index", range(len(RECORDER.IMAGE_CASES)))
@pytest.mark.parametrize("key", ["wide", "tall", "square"])
def test_image_transforms_equal_comfyui_0_10(index, key):
    torch.set_num_threads(1)
    name, params = RECORDER.IMAGE_CASES[index]
    ours = _node(name).execute(RECORDER.inputs()[key], **params)[0]
    expected = _tensor(FIXTURE["image"][f"{index}-{key}"])
    assert ours.shape == expected.shape
    torch.testing.assert_close(ours, expected, atol=1e-6, rtol=0)


@pytest.mark.parametrize("index", range(len(RECORDER.TEXT_CASES)))
def test_text_transforms_equal_comfyui_0_10(index):
    name, params = RECORDER.TEXT_CASES[index]
    assert [_node(name).execute(t, **params)[0] for t in RECORDER.TEXTS] == FIXTURE["text"][str(index)]


def _pool() -> list[torch.Tensor]:
    x = RECORDER.inputs()
    return [x[k] for k in ("wide", "tall", "square", "base", "base_faint")]


@pytest.mark.parametrize("seed", RECORDER.SEEDS)
def test_shuffles_pick_comfyuis_order(seed):
    pool = _pool()
    shuffled = _node("ShuffleDataset").execute(pool, seed=[seed])[0]
    assert [next(i for i, p in enumerate(pool) if p is s or torch.equal(p, s)) for s in shuffled] == FIXTURE["shuffle"][
        str(seed)
    ]
    texts = [f"text {i}" for i in range(len(pool))]
    images, got = _node("ShuffleImageTextDataset").execute(pool, texts, [seed])
    assert got == FIXTURE["shuffle_pairs"][str(seed)]
    assert all(torch.equal(img, pool[int(t.split()[1])]) for img, t in zip(images, got))  # pairs stay together


@pytest.mark.parametrize("threshold", RECORDER.DEDUP_THRESHOLDS)
def test_deduplication_keeps_what_comfyui_keeps(threshold):
    x = RECORDER.inputs()
    given = [x[k] for k in ("base", "wide", "base_faint", "base_noisy", "base_negative", "square")]
    kept = _node("ImageDeduplication").execute(given, similarity_threshold=[threshold])[0]
    assert [next(i for i, g in enumerate(given) if torch.equal(g, k)) for k in kept] == FIXTURE["dedup"][str(threshold)]


def test_image_grid_equals_comfyui_0_10():
    x = RECORDER.inputs()
    grid = _node("ImageGrid").execute(
        [x["wide"], x["tall"], x["square"]], columns=[2], cell_width=[32], cell_height=[32], padding=[3]
    )[0]
    torch.testing.assert_close(grid, _tensor(FIXTURE["grid"]), atol=1e-6, rtol=0)


def test_resolution_bucket_equals_comfyui_0_10():
    latents = [{"samples": _tensor(t)} for t in FIXTURE["bucket"]["inputs"]]
    buckets, conds = _node("ResolutionBucket").execute(latents, [["c0", "c1"], ["c2"], ["c3"]])
    assert conds == FIXTURE["bucket"]["conditioning"]
    for ours, theirs in zip(buckets, FIXTURE["bucket"]["latents"], strict=True):
        assert torch.equal(ours["samples"], _tensor(theirs))


def test_resolution_bucket_names_a_short_conditioning():
    with pytest.raises(ValueError, match="batch of 2 has only 1 conditioning"):
        _node("ResolutionBucket").execute([{"samples": torch.zeros(2, 4, 3, 3)}], [["c0"]])
    with pytest.raises(ValueError, match="2 latents but 1 conditionings"):
        _node("ResolutionBucket").execute([{"samples": torch.zeros(1, 4, 3, 3)}] * 2, [["c0"]])


def test_a_batch_is_transformed_frame_by_frame():
    x = RECORDER.inputs()
    batch = torch.cat([x["square"], x["square"].flip(1)])
    node = _node("RandomCropImages")
    out = node.execute(batch, width=3, height=2, seed=7)[0]
    assert out.shape == (2, 2, 3, 3)
    for i in range(2):
        assert torch.equal(out[i : i + 1], node.execute(batch[i : i + 1], width=3, height=2, seed=7)[0])


def test_whole_list_nodes_split_batches_into_images():
    x = RECORDER.inputs()
    merged = _node("MergeImageLists").execute([torch.cat([x["square"], x["square"]]), x["wide"]])[0]
    assert [tuple(m.shape) for m in merged] == [(1, 6, 6, 3), (1, 6, 6, 3), (1, 5, 7, 3)]


@pytest.fixture
def workspace(tmp_path):
    from nodes.workspace import Workspace, activate

    return activate(Workspace(tmp_path / "ws").create())


async def _run(prompt: dict) -> dict:
    return await run_core_prompt(prompt)


def _image(path: Path, color: tuple[int, int, int], size=(6, 4)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, color).save(path)


async def test_a_captioned_folder_round_trips_through_the_text_nodes(workspace):
    src = workspace.input_dir / "cats"
    _image(src / "a.png", (255, 0, 0))
    (src / "a.txt").write_text("  Red Cat \n")
    _image(src / "b.jpg", (0, 0, 255), size=(4, 4))  # no caption: an empty text
    _image(src / "2_extra" / "c.webp", (0, 255, 0))  # kohya-ss layout: counted twice
    (src / "notes.md").write_text("not an image")
    assert "cats" in dataset.LoadImageTextDataSetFromFolder.INPUT_TYPES()["required"]["folder"][1]["options"]
    prompt = {
        "load": {"class_type": "LoadImageTextDataSetFromFolder", "inputs": {"folder": "cats"}},
        "upper": {"class_type": "TextToUppercase", "inputs": {"texts": ["load", 1]}},
        "prefix": {"class_type": "AddTextPrefix", "inputs": {"texts": ["upper", 0], "prefix": "x:"}},
        "save": {
            "class_type": "SaveImageTextDataSetToFolder",
            "inputs": {
                "images": ["load", 0],
                "texts": ["prefix", 0],
                "folder_name": "out/set",
                "filename_prefix": "img",
            },
        },
    }
    await _run(prompt)
    out = workspace.output_dir / "out" / "set"
    assert sorted(p.name for p in out.iterdir()) == [f"img_0000{i}.{e}" for i in range(4) for e in ("png", "txt")]
    # in name order, the kohya-ss subfolder ("2_extra") first
    assert [(out / f"img_0000{i}.txt").read_text() for i in range(4)] == ["x:", "x:", "x:RED CAT", "x:"]
    pixels = [Image.open(out / f"img_0000{i}.png").getpixel((0, 0)) for i in range(4)]
    assert [max(range(3), key=p.__getitem__) for p in pixels] == [1, 1, 0, 2]  # green, green, red, blue
    assert all(max(p) >= 250 and sorted(p)[1] <= 5 for p in pixels)  # JPEG and WebP are lossy


async def test_image_folder_to_grid(workspace):
    for i, color in enumerate([(255, 0, 0), (0, 255, 0), (0, 0, 255)]):
        _image(workspace.input_dir / "set" / f"{i}.png", color)
    prompt = {
        "load": {"class_type": "LoadImageDataSetFromFolder", "inputs": {"folder": "set"}},
        "grid": {
            "class_type": "ImageGrid",
            "inputs": {"images": ["load", 0], "columns": 2, "cell_width": 32, "cell_height": 32, "padding": 2},
        },
        "save": {
            "class_type": "SaveImageDataSetToFolder",
            "inputs": {"images": ["grid", 0], "folder_name": "grid", "filename_prefix": "g"},
        },
    }
    await _run(prompt)
    grid = Image.open(workspace.output_dir / "grid" / "g_00000.png")
    assert grid.size == (66, 66)
    assert [grid.getpixel(p) for p in [(0, 0), (40, 0), (0, 40), (40, 40), (33, 0)]] == [
        (255, 0, 0),
        (0, 255, 0),
        (0, 0, 255),
        (0, 0, 0),
        (0, 0, 0),
    ]


def test_folders_outside_the_workspace_are_refused(workspace):
    from nodes.safe_paths import UnsafePath

    with pytest.raises(UnsafePath):
        _node("LoadImageDataSetFromFolder").execute("../..")
    with pytest.raises(FileNotFoundError, match="no folder 'missing'"):
        _node("LoadImageDataSetFromFolder").execute("missing")
    (workspace.input_dir / "empty").mkdir()
    with pytest.raises(ValueError, match="no images"):
        _node("LoadImageDataSetFromFolder").execute("empty")
    with pytest.raises(UnsafePath):
        _node("SaveImageDataSetToFolder").execute([torch.zeros(1, 2, 2, 3)], ["../escape"], ["img"])
    with pytest.raises(UnsafePath):
        _node("SaveImageDataSetToFolder").execute([torch.zeros(1, 2, 2, 3)], ["ok"], ["../../img"])
