"""Image files: SaveImage/PreviewImage naming and PNG text chunks, traversal refusal, LoadImage/LoadImageMask."""

from __future__ import annotations

import hashlib
import json
import re

import numpy as np
import pytest
import torch
from PIL import Image

from nodes.image_io import (
    LoadImage,
    LoadImageMask,
    LoadImageOutput,
    PreviewImage,
    SaveImage,
    annotated_path,
    load_image_tensor,
    save_image_path,
)

PROMPT = {"9": {"class_type": "SaveImage", "inputs": {"filename_prefix": "ComfyUI", "images": ["8", 0]}}}
WORKFLOW = {"nodes": [{"id": 9, "type": "SaveImage", "title": "Sauvegarde é"}], "links": [], "version": 0.4}


def test_save_image_writes_prompt_and_workflow_chunks(workspace):
    img = torch.rand(1, 8, 12, 3)
    res = SaveImage().save_images(img, "ComfyUI", PROMPT, {"workflow": WORKFLOW})
    assert res["ui"] == {"images": [{"filename": "ComfyUI_00001_.png", "subfolder": "", "type": "output"}]}
    assert res["result"][0] is img  # today's ComfyUI passes the images on (an Image Compare may take them)
    with Image.open(workspace.output_dir / "ComfyUI_00001_.png") as png:
        assert png.size == (12, 8)
        assert png.text["prompt"] == json.dumps(PROMPT)
        assert png.text["workflow"] == json.dumps(WORKFLOW)
        assert set(png.text) == {"prompt", "workflow"}
        pixels = np.asarray(png.convert("RGB"))
    expected = np.clip(255.0 * img[0].numpy(), 0, 255).astype(np.uint8)
    assert np.array_equal(pixels, expected)


def test_save_image_without_metadata_has_no_chunks(workspace):
    SaveImage().save_images(torch.rand(1, 4, 4, 3), "plain")
    with Image.open(workspace.output_dir / "plain_00001_.png") as png:
        assert png.text == {}


def test_save_image_counter_continues_after_existing_files(workspace):
    (workspace.output_dir / "ComfyUI_00007_.png").write_bytes(b"")
    (workspace.output_dir / "ComfyUI_notanumber_.png").write_bytes(b"")
    (workspace.output_dir / "Other_00042_.png").write_bytes(b"")
    res = SaveImage().save_images(torch.rand(2, 4, 4, 3), "ComfyUI")
    assert [r["filename"] for r in res["ui"]["images"]] == ["ComfyUI_00008_.png", "ComfyUI_00009_.png"]


def test_save_image_subfolder_and_batch_num(workspace):
    res = SaveImage().save_images(torch.rand(2, 4, 4, 3), "runs/a/img_%batch_num%")
    files = res["ui"]["images"]
    assert [f["filename"] for f in files] == ["img_0_00001_.png", "img_1_00002_.png"]
    assert {f["subfolder"] for f in files} == {"runs/a"}
    assert (workspace.output_dir / "runs" / "a" / "img_1_00002_.png").is_file()


def test_save_image_size_variables(workspace):
    res = SaveImage().save_images(torch.rand(1, 6, 10, 3), "%width%x%height%")
    assert res["ui"]["images"][0]["filename"] == "10x6_00001_.png"


@pytest.mark.parametrize("prefix", ["../escape", "a/../../escape", "/tmp/abs/escape"])
def test_save_image_refuses_prefix_outside_output(workspace, prefix):
    with pytest.raises(ValueError, match="outside the output folder"):
        SaveImage().save_images(torch.rand(1, 4, 4, 3), prefix)
    assert not (workspace.root / "escape_00001_.png").exists()


def test_save_image_path_allows_dotdot_that_stays_inside(workspace):
    folder, stem, counter, subfolder, _ = save_image_path("a/../b/x", workspace.output_dir)
    assert (stem, counter, subfolder) == ("x", 1, "b")


def test_preview_image_goes_to_temp_with_random_tag(workspace):
    node = PreviewImage()
    res = node.save_images(torch.rand(1, 4, 4, 3), prompt=PROMPT)
    item = res["ui"]["images"][0]
    assert item["type"] == "temp" and item["subfolder"] == ""
    assert re.fullmatch(r"ComfyUI_temp_[a-z]{5}_00001_\.png", item["filename"])
    assert (workspace.temp_dir / item["filename"]).is_file()
    again = node.save_images(torch.rand(1, 4, 4, 3))["ui"]["images"][0]["filename"]
    assert again == item["filename"].replace("00001", "00002")


@pytest.mark.parametrize("node,level", [(SaveImage, 4), (PreviewImage, 1)])
def test_compression_levels_match_comfyui(workspace, tmp_path, node, level):
    ramp = torch.linspace(0, 1, 64).reshape(1, 1, 64, 1).expand(1, 48, 64, 3)
    item = node().save_images(ramp)["ui"]["images"][0]
    folder = workspace.output_dir if item["type"] == "output" else workspace.temp_dir
    written = (folder / item["filename"]).read_bytes()
    for other in (1, 4, 9):
        Image.fromarray(np.clip(255.0 * ramp[0].numpy(), 0, 255).astype(np.uint8)).save(
            tmp_path / f"{other}.png", compress_level=other
        )
    sizes = {other: (tmp_path / f"{other}.png").stat().st_size for other in (1, 4, 9)}
    assert len(set(sizes.values())) == 3  # the levels are distinguishable on this image
    assert written == (tmp_path / f"{level}.png").read_bytes()


def write_rgba(path, alpha_value=64):
    rgba = np.zeros((6, 5, 4), dtype=np.uint8)
    rgba[..., 0] = 200
    rgba[..., 3] = 255
    rgba[0, 0, 3] = alpha_value
    Image.fromarray(rgba, "RGBA").save(path)
    return rgba


def test_load_image_rgb_and_mask_from_alpha(workspace):
    rgba = write_rgba(workspace.input_dir / "a.png")
    image, mask = LoadImage().load_image("a.png")
    assert image.shape == (1, 6, 5, 3) and mask.shape == (1, 6, 5)
    torch.testing.assert_close(image[0], torch.from_numpy(rgba[..., :3].astype(np.float32) / 255.0))
    assert mask[0, 0, 0].item() == pytest.approx(1 - 64 / 255)
    assert mask[0, 1, 1].item() == 0.0


def test_load_image_without_alpha_gives_64px_empty_mask(workspace):
    Image.new("RGB", (7, 3), (0, 255, 0)).save(workspace.input_dir / "g.png")
    image, mask = LoadImage().load_image("g.png")
    assert image.shape == (1, 3, 7, 3) and torch.equal(image[0, 0, 0], torch.tensor([0.0, 1.0, 0.0]))
    assert mask.shape == (1, 64, 64) and not mask.any()


def test_load_image_palette_transparency_becomes_mask(tmp_path):
    img = Image.new("P", (4, 4), 1)
    img.putpalette([0, 0, 0, 255, 0, 0] + [0] * 762)
    img.putpixel((0, 0), 0)
    img.save(tmp_path / "p.png", transparency=0)
    _, mask = load_image_tensor(tmp_path / "p.png")
    assert mask[0, 0, 0].item() == 1.0 and mask[0, 1, 1].item() == 0.0


def test_load_image_multi_frame_gif(tmp_path):
    frames = [Image.new("RGB", (4, 4), (255, 0, 0)), Image.new("RGB", (4, 4), (0, 0, 255))]
    frames[0].save(tmp_path / "anim.gif", save_all=True, append_images=frames[1:], duration=50)
    image, mask = load_image_tensor(tmp_path / "anim.gif")
    assert image.shape == (2, 4, 4, 3) and mask.shape[0] == 2
    assert image[0, 0, 0, 0] > 0.9 and image[1, 0, 0, 2] > 0.9


def test_load_image_applies_exif_orientation(tmp_path):
    img = Image.new("RGB", (6, 2), (0, 0, 0))
    img.putpixel((0, 0), (255, 255, 255))
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90 CW to display"
    img.save(tmp_path / "r.jpg", exif=exif, quality=100)
    image, _ = load_image_tensor(tmp_path / "r.jpg")
    assert image.shape == (1, 6, 2, 3)
    assert image[0, 0, 1].mean() > 0.8  # the bright corner moved to the top right


def test_load_image_annotated_names(workspace):
    write_rgba(workspace.output_dir / "o.png")
    (workspace.output_dir / "sub").mkdir()
    write_rgba(workspace.output_dir / "sub" / "s.png")
    assert annotated_path("o.png [output]") == workspace.output_dir / "o.png"
    assert annotated_path("sub/s.png [output]") == workspace.output_dir / "sub" / "s.png"
    assert annotated_path("x.png [temp]") == workspace.temp_dir / "x.png"
    assert annotated_path("x.png") == workspace.input_dir / "x.png"
    image, _ = LoadImageOutput().load_image("o.png [output]")
    assert image.shape == (1, 6, 5, 3)


def test_load_image_validate_inputs(workspace):
    write_rgba(workspace.input_dir / "a.png")
    assert LoadImage.VALIDATE_INPUTS("a.png") is True
    assert LoadImage.VALIDATE_INPUTS("missing.png") == "Invalid image file: missing.png"
    assert LoadImage.VALIDATE_INPUTS("../ws/input/a.png") is not True  # no climbing out of the folder
    assert LoadImageMask.VALIDATE_INPUTS("missing.png") == "Invalid image file: missing.png"


def test_file_reading_nodes_refuse_a_symlink_out_of_their_folder(workspace, tmp_path):
    """The rule of /view: the resolved file must lie inside its folder, so a link cannot reach out."""
    outside = tmp_path / "secret.png"
    write_rgba(outside)
    for folder in (workspace.input_dir, workspace.output_dir, workspace.temp_dir):
        (folder / "link.png").symlink_to(outside)
    (workspace.input_dir / "linkdir").symlink_to(tmp_path, target_is_directory=True)
    for name in ("link.png", "link.png [input]", "link.png [output]", "link.png [temp]", "linkdir/secret.png"):
        with pytest.raises(ValueError):
            LoadImage().load_image(name)
        with pytest.raises(ValueError):
            LoadImageMask().load_image(name, "alpha")
        with pytest.raises(ValueError):
            LoadImage.IS_CHANGED(name)
        assert LoadImage.VALIDATE_INPUTS(name) == f"Invalid image file: {name}"
        assert LoadImageMask.VALIDATE_INPUTS(name) == f"Invalid image file: {name}"
    with pytest.raises(ValueError):
        LoadImageOutput().load_image("link.png [output]")


def test_file_reading_nodes_follow_a_symlink_that_stays_inside(workspace):
    write_rgba(workspace.input_dir / "a.png")
    (workspace.input_dir / "alias.png").symlink_to(workspace.input_dir / "a.png")
    image, _ = LoadImage().load_image("alias.png")
    assert image.shape == (1, 6, 5, 3) and LoadImage.VALIDATE_INPUTS("alias.png") is True


def test_load_image_is_changed_is_file_sha256(workspace):
    path = workspace.input_dir / "a.png"
    write_rgba(path, 10)
    first = LoadImage.IS_CHANGED("a.png")
    assert first == hashlib.sha256(path.read_bytes()).hexdigest()
    write_rgba(path, 20)
    assert LoadImage.IS_CHANGED("a.png") != first
    assert LoadImageMask.IS_CHANGED("a.png", "red") == LoadImage.IS_CHANGED("a.png")


def test_load_image_lists_input_images_only(workspace):
    write_rgba(workspace.input_dir / "b.png")
    write_rgba(workspace.input_dir / "a.png")
    (workspace.input_dir / "c.webp").write_bytes(b"")
    (workspace.input_dir / "notes.txt").write_text("x")
    (workspace.input_dir / "dir.png").mkdir()
    choices, opts = LoadImage.INPUT_TYPES()["required"]["image"]
    assert choices == ["a.png", "b.png", "c.webp"] and opts == {"image_upload": True}
    mask_choices = LoadImageMask.INPUT_TYPES()["required"]["image"][0]
    assert mask_choices == ["a.png", "b.png", "c.webp", "notes.txt"]


@pytest.mark.parametrize(
    "channel,expected", [("red", 200 / 255), ("green", 0.0), ("blue", 0.0), ("alpha", 1 - 64 / 255)]
)
def test_load_image_mask_channels(workspace, channel, expected):
    write_rgba(workspace.input_dir / "a.png")
    (mask,) = LoadImageMask().load_image("a.png", channel)
    assert mask.shape == (1, 6, 5)
    assert mask[0, 0, 0].item() == pytest.approx(expected)


def test_load_image_mask_of_rgb_file_has_opaque_alpha(workspace):
    Image.new("RGB", (3, 3), (10, 20, 30)).save(workspace.input_dir / "rgb.png")
    (mask,) = LoadImageMask().load_image("rgb.png", "alpha")
    assert mask.shape == (1, 3, 3) and not mask.any()


def test_save_then_load_round_trip(workspace):
    img = torch.rand(1, 9, 7, 3)
    res = SaveImage().save_images(img, "rt")
    name = res["ui"]["images"][0]["filename"] + " [output]"
    loaded, mask = LoadImage().load_image(name)
    assert loaded.shape == img.shape and mask.shape == (1, 64, 64)
    assert (loaded - img).abs().max() <= 1 / 255 + 1e-6


def test_disabled_metadata_writes_no_chunks(workspace):
    from nodes import image_io

    image_io.set_metadata_enabled(False)
    try:
        SaveImage().save_images(torch.rand(1, 4, 4, 3), "nometa", PROMPT, {"workflow": WORKFLOW})
    finally:
        image_io.set_metadata_enabled(True)
    with Image.open(workspace.output_dir / "nometa_00001_.png") as png:
        assert png.text == {}
