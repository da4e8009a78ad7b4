"""MiniMax H3 text-to-video with its audio (workflows_json/minimax_h3_t2v.json: the web UI's video_minimax_h3_t2v
template's subgraph, its nodes and sampler settings: the duration math, the LoRA switch (off, as in the template)
over the model and the steps, res_multistep, both VAEs, VAE Decode Audio into CreateVideo and SaveVideo; the tiny
demo files in place of the downloads, 64x32 pixels, 5 frames, 4 steps) from a fresh, empty workspace, with the
default executors and with `--executors 0`: the same frames, the MP4 the same frames and the same audio samples,
the audio track 5 frames long at 32 kHz stereo and not silent. Equality with diffusers' MiniMax H3 loop (video and
audio) is checked for the same chain with the Euler sampler, the only one diffusers has, in
tests/nodes/test_minimax_h3_nodes.py."""

from __future__ import annotations

import json

import numpy as np

from tests.e2e.served import REPO
from tests.e2e.served_video import render_videos_in_both_modes, with_png_frames

WORKFLOW = REPO / "workflows_json" / "minimax_h3_t2v.json"


def _audio_tracks(output_dir) -> list[tuple[np.ndarray, int]]:
    import av

    tracks = []
    for path in sorted((output_dir / "video").glob("MiniMax_H3_*.mp4")):
        with av.open(str(path)) as container:
            stream = container.streams.audio[0]
            samples = np.concatenate([f.to_ndarray() for f in container.decode(audio=0)], axis=-1)
            tracks.append((samples, stream.rate))
    return tracks


def test_text_to_video_with_audio_in_both_executor_modes(tmp_path) -> None:
    prompts = {"t2v": with_png_frames(json.loads(WORKFLOW.read_text()))}
    pngs, mp4 = render_videos_in_both_modes(tmp_path, prompts)["t2v"]
    assert pngs.shape == (5, 32, 64, 3) and pngs.std() > 0 and len(mp4) == 5
    (first, rate), (second, other_rate) = _audio_tracks(tmp_path / "fresh" / "output")
    assert rate == other_rate == 32000 and first.shape[0] == 2
    # AAC frames round the track up; the decoded audio is 5 frames at 24 fps (6667 samples) or a little more
    assert 5 / 24 * rate <= first.shape[-1] <= 5 / 24 * rate + 2048
    assert np.abs(first).max() > 1e-4, "the audio track is silent"
    assert np.array_equal(first, second), "audio samples differ between the executor modes"


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
    classes = {n["type"] for n in ui["nodes"]}
    assert classes >= {"VAEDecodeAudio", "CreateVideo", "ComfyMathExpression", "ComfySwitchNode", "LoraLoaderModelOnly"}
