"""MiniMax H3 image-to-video with its audio (workflows_json/minimax_h3_i2v.json: the web UI's video_minimax_h3_i2v
template's subgraph, which its continuation variant shares: LoadImage as MiniMaxH3ImageToVideo's first frame, the
LoRA switch over the model and the steps, res_multistep, both VAEs, VAE Decode Audio into CreateVideo and SaveVideo;
the tiny demo files in place of the downloads, 64x32 pixels, 5 frames) from a fresh, empty workspace, with the
default executors and with `--executors 0`: the same frames, the same MP4 frames and audio samples. Rendered as the
template has it (switch off, 4 steps) and with the switch on (the turbo LoRA, 2 steps); beside them the same graph
without its first frame, whose video differs: the picture reaches the video. Equality with diffusers (text encoder
with the picture, keyframe rows, steps) is shown in tests/models/test_minimax_h3_text.py and
tests/nodes/test_minimax_h3_nodes.py."""

from __future__ import annotations

import json

import numpy as np

from tests.e2e.served import REPO
from tests.e2e.served_video import render_videos_in_both_modes, with_png_frames

WORKFLOW = REPO / "workflows_json" / "minimax_h3_i2v.json"
SAVE, SWITCH, IMAGE_TO_VIDEO = "92", "139", "131"


def _cases() -> dict[str, dict]:
    cases = {}
    for case in ("i2v", "turbo", "no_frame"):
        prompt = json.loads(WORKFLOW.read_text())
        prompt[SAVE]["inputs"]["filename_prefix"] = f"video/MiniMax_H3_{case}"
        if case == "turbo":
            prompt[SWITCH]["inputs"]["value"] = True
        if case == "no_frame":
            del prompt[IMAGE_TO_VIDEO]["inputs"]["first_frame"]
        cases[case] = with_png_frames(prompt)
    return cases


def _audio(output_dir, case: str) -> list[np.ndarray]:
    import av

    tracks = []
    for path in sorted((output_dir / "video").glob(f"MiniMax_H3_{case}_*.mp4")):
        with av.open(str(path)) as container:
            assert container.streams.audio[0].rate == 32000
            tracks.append(np.concatenate([f.to_ndarray() for f in container.decode(audio=0)], axis=-1))
    return tracks


def test_image_to_video_with_audio_in_both_executor_modes(tmp_path) -> None:
    prompts = _cases()
    default = render_videos_in_both_modes(tmp_path, prompts)
    for case in prompts:
        pngs, mp4 = default[case]
        assert pngs.shape == (5, 32, 64, 3) and pngs.std() > 0 and len(mp4) == 5, case
        first, second = _audio(tmp_path / "fresh" / "output", case)
        assert first.shape[0] == 2 and np.abs(first).max() > 1e-4, f"{case}: the audio track is silent"
        assert np.array_equal(first, second), f"{case}: audio samples differ between the executor modes"
    assert not np.array_equal(default["i2v"][0], default["no_frame"][0]), "the first frame does not reach the video"
    assert not np.array_equal(default["i2v"][0], default["turbo"][0]), "the turbo switch changes nothing"


def test_ui_file_is_the_api_workflow() -> None:
    """The web UI file (scripts/minimax_h3_workflow.py) converts back to the API file the test renders."""
    from comfy_bridge import compat
    from comfy_bridge.formats import ui_to_api
    from comfy_bridge.registry import NodeRegistry

    compat.install()
    import nodes

    registry = NodeRegistry()
    registry.add_builtin(nodes.NODE_CLASS_MAPPINGS)
    ui = json.loads(WORKFLOW.with_suffix("").with_suffix(".ui.json").read_text())
    back = {k: {"class_type": v["class_type"], "inputs": v["inputs"]} for k, v in ui_to_api(ui, registry).items()}
    assert back == json.loads(WORKFLOW.read_text())
    assert {"LoadImage", "MiniMaxH3ImageToVideo", "LoraLoaderModelOnly"} <= {n["type"] for n in ui["nodes"]}
