"""VIDEO and AUDIO values and ComfyUI's file nodes for them (comfy_extras.nodes_video / nodes_audio):
CreateVideo -> SaveVideo -> LoadVideo -> GetVideoComponents keeps the frames (within H.264's loss), the
frame rate and the audio; a loaded MP4 is saved again stream by stream (frames unchanged); audio survives
FLAC exactly (16-bit samples) and MP3 / Opus within a stated bound; files carry the workflow in their
tags; bad values are refused with errors naming them. Video files compare decoded frames, never bytes."""

from __future__ import annotations

import io
import json
import math
import pickle
import shutil
from fractions import Fraction

import av
import numpy as np
import pytest
import torch

from nodes.library import audio as audio_nodes
from nodes.library import video as video_nodes
from nodes.media.video import VideoComponents, VideoFromComponents, VideoFromFile, VideoInput

RATE = 44100


def _frames(count: int = 6, height: int = 48, width: int = 64) -> torch.Tensor:
    """Smooth gradients that move from frame to frame (what H.264 keeps well)."""
    y = torch.linspace(0, 1, height)[:, None].expand(height, width)
    x = torch.linspace(0, 1, width)[None, :].expand(height, width)
    return torch.stack([torch.stack([x * (i + 1) / count, y, (x + y) / 2], dim=-1) for i in range(count)])


def _sine(seconds: float = 1.0, rate: int = RATE, quantized: bool = False) -> torch.Tensor:
    t = torch.arange(int(seconds * rate)) / rate
    wave = torch.stack([0.5 * torch.sin(2 * math.pi * 440 * t), 0.25 * torch.sin(2 * math.pi * 660 * t)])
    # on the 16-bit grid, a FLAC round trip must give back every sample exactly
    return torch.round(wave * 32768) / 32768 if quantized else wave


def _decoded(path) -> np.ndarray:
    with av.open(str(path)) as container:
        return np.stack([f.to_ndarray(format="rgb24") for f in container.decode(video=0)])


def _tags(path) -> dict:
    with av.open(str(path)) as container:
        return dict(container.metadata)


def _output(ws, entry: dict):
    return getattr(ws, f"{entry['type']}_dir") / entry["subfolder"] / entry["filename"]


@pytest.fixture
def ws(demo_workspace):
    return demo_workspace


def test_create_save_load_video_keeps_frames_rate_and_audio(ws):
    frames, sound = _frames(), {"waveform": _sine(0.75)[None], "sample_rate": RATE}
    (video,) = video_nodes.CreateVideo().create_video(frames, 8.0, sound)
    prompt, workflow = {"1": {"class_type": "CreateVideo"}}, {"nodes": []}
    ui = video_nodes.SaveVideo().save_video(video, "video/test", "auto", "auto", prompt, {"workflow": workflow})["ui"]
    [entry] = ui["images"]
    assert ui["animated"] == (True,)
    assert entry["subfolder"] == "video" and entry["type"] == "output"
    assert entry["filename"].startswith("test_") and entry["filename"].endswith("_.mp4")
    path = _output(ws, entry)
    tags = _tags(path)
    assert json.loads(tags["prompt"]) == prompt and json.loads(tags["workflow"]) == workflow

    shutil.copy(path, ws.input_dir / "roundtrip.mp4")
    assert "roundtrip.mp4" in video_nodes.LoadVideo.INPUT_TYPES()["required"]["file"][1]["options"]
    (loaded,) = video_nodes.LoadVideo().load_video("roundtrip.mp4")
    images, audio, fps, bit_depth, color_space = video_nodes.GetVideoComponents().get_components(loaded)
    assert fps == 8.0 and loaded.get_dimensions() == (64, 48) and loaded.get_frame_count() == 6
    assert (bit_depth, color_space) == (8, "sRGB")
    assert images.shape == frames.shape
    # H.264 in yuv420p (and 8-bit truncation) is lossy: the smooth frames come back within a few levels
    assert (images - frames).abs().mean() < 3 / 255 and (images - frames).abs().max() < 0.1
    assert audio["sample_rate"] == RATE and audio["waveform"].shape[:2] == (1, 2)
    # the audio is cut to the video's length (6 frames at 8 fps), then padded to AAC's frames of 1024 samples
    assert 0.75 * RATE <= audio["waveform"].shape[-1] < 0.75 * RATE + 2048


def test_a_loaded_mp4_is_saved_again_stream_by_stream(ws):
    (video,) = video_nodes.CreateVideo().create_video(_frames(), 12.0)
    first = _output(ws, video_nodes.SaveVideo().save_video(video, "copy/a")["ui"]["images"][0])
    again = _output(
        ws, video_nodes.SaveVideo().save_video(VideoFromFile(str(first)), "copy/b", prompt={"x": 1})["ui"]["images"][0]
    )
    assert np.array_equal(_decoded(first), _decoded(again))  # packets copied, not encoded a second time
    assert json.loads(_tags(again)["prompt"]) == {"x": 1}


def test_video_values_are_comfyuis_types():
    video = VideoFromComponents(VideoComponents(images=_frames(4), frame_rate=Fraction(24)))
    assert isinstance(video, VideoInput)
    assert video.get_dimensions() == (64, 48) and video.get_frame_count() == 4
    assert video.get_duration() == pytest.approx(4 / 24)
    buffer = io.BytesIO()
    video.save_to(buffer)
    from_bytes = VideoFromFile(io.BytesIO(buffer.getvalue()))
    assert from_bytes.get_frame_rate() == 24 and "mp4" in from_bytes.get_container_format()
    assert np.array_equal(
        from_bytes.get_components().images.numpy(),
        VideoFromFile(video.get_stream_source()).get_components().images.numpy(),
    )


def test_a_video_file_travels_with_its_bytes(ws, tmp_path):
    """Pickled for an executor, a VideoFromFile keeps its path where the file is, else carries its bytes."""
    path = tmp_path / "clip.mp4"
    VideoFromComponents(VideoComponents(images=_frames(3), frame_rate=Fraction(10))).save_to(str(path))
    here = pickle.loads(pickle.dumps(VideoFromFile(str(path))))
    assert here.get_stream_source() == str(path)
    blob = pickle.dumps(VideoFromFile(str(path)))
    path.rename(tmp_path / "gone.mp4")  # as on a machine without the head's input folder
    elsewhere = pickle.loads(blob)
    assert isinstance(elsewhere.get_stream_source(), io.BytesIO)
    assert np.array_equal(
        elsewhere.get_components().images.numpy(),
        VideoFromFile(str(tmp_path / "gone.mp4")).get_components().images.numpy(),
    )


def test_flac_round_trip_gives_the_samples_back(ws):
    wave = _sine(quantized=True)
    ui = audio_nodes.SaveAudio().save_audio(
        {"waveform": wave[None], "sample_rate": RATE}, "audio/sine", prompt={"p": 1}
    )["ui"]
    [entry] = ui["audio"]
    assert entry["subfolder"] == "audio" and entry["type"] == "output" and entry["filename"].endswith("_.flac")
    path = _output(ws, entry)
    assert json.loads(_tags(path)["prompt"]) == {"p": 1}
    shutil.copy(path, ws.input_dir / "sine.flac")
    assert "sine.flac" in audio_nodes.LoadAudio.INPUT_TYPES()["required"]["audio"][1]["options"]
    (loaded,) = audio_nodes.LoadAudio().load("sine.flac")
    assert loaded["sample_rate"] == RATE and loaded["waveform"].dtype == torch.float32
    assert torch.equal(loaded["waveform"], wave[None])


def test_flac_rounds_other_samples_to_16_bits(ws):
    wave = _sine(0.2)
    [entry] = audio_nodes.SaveAudio().save_audio({"waveform": wave[None], "sample_rate": RATE}, "audio/raw")["ui"][
        "audio"
    ]
    (loaded,) = audio_nodes.LoadAudio().load(str(_output(ws, entry).relative_to(ws.output_dir)) + " [output]")
    assert (loaded["waveform"][0] - wave).abs().max() <= 1 / 32768


@pytest.mark.parametrize("node, quality", [(audio_nodes.SaveAudioMP3, "V0"), (audio_nodes.SaveAudioOpus, "128k")])
def test_lossy_formats_keep_the_sine_within_a_bound(ws, node, quality):
    wave = _sine()
    [entry] = node().save_audio({"waveform": wave[None], "sample_rate": RATE}, "audio/lossy", quality)["ui"]["audio"]
    loaded = audio_nodes.load_audio(_output(ws, entry))
    got = loaded["waveform"][0]
    if node is audio_nodes.SaveAudioOpus:
        # Opus has no 44.1 kHz: written at 48 kHz; compared with the same sine at 48 kHz, edges (resampler) left out
        assert loaded["sample_rate"] == 48000 and got.shape == (2, 48000)
        t = torch.arange(48000) / 48000
        wave = torch.stack([0.5 * torch.sin(2 * math.pi * 440 * t), 0.25 * torch.sin(2 * math.pi * 660 * t)])
        got, wave = got[:, 2000:-2000], wave[:, 2000:-2000]
    else:
        assert loaded["sample_rate"] == RATE and got.shape == wave.shape  # gapless: encoder delay removed
    assert (got - wave).abs().max() < 0.02


def test_preview_audio_goes_to_temp_and_batches_make_one_file_each(ws):
    wave = _sine(0.1)
    ui = audio_nodes.PreviewAudio().preview_audio({"waveform": torch.stack([wave, wave / 2]), "sample_rate": RATE})
    entries = ui["ui"]["audio"]
    assert [e["type"] for e in entries] == ["temp", "temp"]
    assert all(_output(ws, e).is_file() for e in entries)


def test_trim_and_empty_latent_audio():
    wave = _sine(1.0)[None]
    (cut,) = audio_nodes.TrimAudioDuration().trim({"waveform": wave, "sample_rate": RATE}, -0.5, 0.25)
    assert torch.equal(cut["waveform"], wave[..., RATE // 2 : RATE // 2 + RATE // 4])
    (latent,) = audio_nodes.EmptyLatentAudio().generate(47.6, 2)
    assert latent["samples"].shape == (2, 64, 1024) and latent["type"] == "audio"


def test_bad_values_are_refused_with_errors_naming_them(ws):
    with pytest.raises(ValueError, match="even width and height"):
        video_nodes.SaveVideo().save_video(video_nodes.CreateVideo().create_video(torch.zeros(2, 5, 8, 3), 8.0)[0])
    (video,) = video_nodes.CreateVideo().create_video(_frames(2), 8.0)
    with pytest.raises(ValueError, match="format: 'avi' is not one of auto, mp4"):
        video_nodes.SaveVideo().save_video(video, format="avi")
    with pytest.raises(ValueError, match="video: expected a VIDEO value"):
        video_nodes.GetVideoComponents().get_components(torch.zeros(1))
    with pytest.raises(ValueError, match="audio: no audio"):
        audio_nodes.SaveAudio().save_audio(None)
    with pytest.raises(ValueError, match="MP3 holds one or two channels"):
        audio_nodes.SaveAudioMP3().save_audio({"waveform": torch.zeros(1, 3, 100), "sample_rate": RATE})
    assert video_nodes.LoadVideo.VALIDATE_INPUTS("missing.mp4") == "Invalid video file: missing.mp4"
    assert audio_nodes.LoadAudio.VALIDATE_INPUTS("../secret.flac") == "Invalid audio file: ../secret.flac"
    (ws.input_dir / "not_a_video.mp4").write_bytes(b"plain text")
    with pytest.raises(ValueError, match="'not_a_video.mp4' cannot be read as a video"):
        video_nodes.LoadVideo().load_video("not_a_video.mp4")[0].get_components()


@pytest.mark.parametrize("fmt, quality", [("flac", None), ("mp3", "320k"), ("opus", "64k")])
def test_save_audio_advanced_takes_its_format_and_quality_from_the_dynamic_combo(ws, fmt, quality):
    """As the web UI sends it: the chosen format, and its option's quality as `format.quality`."""
    import asyncio

    from comfy_bridge.execution import PromptExecutor
    from comfy_bridge.registry import build_registry
    from comfy_bridge.validation import validate_prompt

    registry = build_registry(ws)
    path = ws.input_dir / "advanced.flac"
    path.write_bytes(audio_nodes.encode_to_bytes(_sine(0.5, quantized=True), RATE, "flac"))
    inputs = {
        "audio": ["1", 0],
        "filename_prefix": "audio/advanced",
        "format": fmt,
        **({"format.quality": quality} if quality else {}),
    }
    prompt = {
        "1": {"class_type": "LoadAudio", "inputs": {"audio": "advanced.flac"}},
        "2": {"class_type": "SaveAudioAdvanced", "inputs": inputs},
        "3": {"class_type": "PreviewAudio", "inputs": {"audio": ["2", 0]}},
    }

    async def run():
        valid, error, outputs, node_errors = await validate_prompt(registry, "adv", prompt, None)
        assert valid, (error, node_errors)
        executor = PromptExecutor(
            registry, type("Sink", (), {"client_id": None, "last_node_id": None, "send_sync": lambda *a, **k: None})()
        )
        await executor.execute_async(prompt, "adv", {}, outputs)
        assert executor.success, executor.status_messages
        return executor.history_result["outputs"]

    outputs = asyncio.run(run())
    [entry] = outputs["2"]["audio"]
    assert entry["filename"].endswith(f"_.{fmt}")
    saved = _output(ws, entry)
    with av.open(str(saved)) as container:
        stream = container.streams.audio[0]
        assert stream.codec_context.name.startswith(fmt)
        packet_bits = 8 * sum(p.size for p in container.demux(stream))
    if quality:
        # the chosen bit rate, not the 128k default: a short clip spends a little more than its rate
        rate = int(quality[:-1]) * 1000
        assert rate <= packet_bits / 0.5 < 1.4 * rate
    assert outputs["3"]["audio"][0]["type"] == "temp"  # the AUDIO output went on to the next node


def test_trim_video_keeps_the_frames_and_audio_of_its_window(ws):
    frames = _frames(12)
    sound = {"waveform": _sine(1.5)[None], "sample_rate": RATE}
    (video,) = video_nodes.CreateVideo().create_video(frames, 8.0, sound)  # 12 frames: 1.5 s
    (cut,) = video_nodes.VideoSlice().slice(video, 0.25, 0.5, False)
    parts = cut.get_components()
    assert torch.equal(parts.images, frames[2:6]) and parts.frame_rate == 8
    assert torch.equal(parts.audio["waveform"], sound["waveform"][..., RATE // 4 : 3 * RATE // 4])
    (tail,) = video_nodes.VideoSlice().slice(video, -0.5, 0.0, False)  # negative: from the end, to the end
    assert torch.equal(tail.get_components().images, frames[8:])
    (rest,) = video_nodes.VideoSlice().slice(video, 1.0, 5.0, False)  # longer than the video: what there is
    assert rest.get_frame_count() == 4
    with pytest.raises(ValueError, match="holds no part of this 1.500 s video \\(strict duration\\)"):
        video_nodes.VideoSlice().slice(video, 1.0, 5.0, True)
    with pytest.raises(ValueError, match="holds no part"):
        video_nodes.VideoSlice().slice(video, 2.0, 0.0, False)
    # a file is trimmed too; saving the result encodes the window
    path = ws.output_dir / "trim_source.mp4"
    video.save_to(str(path))
    (from_file,) = video_nodes.VideoSlice().slice(VideoFromFile(str(path)), 0.5, 0.25, False)
    assert from_file.get_frame_count() == 2
    cropped = video.as_cropped(3, 4, 20, 15).get_components().images
    assert torch.equal(cropped, frames[:, 4:18, 2:22])  # even-aligned for H.264


def test_audio_channel_volume_and_mixing_nodes():
    stereo = {"waveform": _sine(0.5)[None], "sample_rate": RATE}
    left, right = audio_nodes.SplitAudioChannels().separate(stereo)
    assert torch.equal(left["waveform"], stereo["waveform"][:, :1])
    (joined,) = audio_nodes.JoinAudioChannels().join(left, right)
    assert torch.equal(joined["waveform"], stereo["waveform"])
    (louder,) = audio_nodes.AudioAdjustVolume().adjust_volume(stereo, 6)
    assert torch.allclose(louder["waveform"], stereo["waveform"] * 10**0.3)
    (silence,) = audio_nodes.EmptyAudio().create_empty_audio(0.25, 8000, 1)
    assert silence["waveform"].shape == (1, 1, 2000) and not silence["waveform"].any()
    # different rates: the lower one is resampled up (FFmpeg's resampler); mono becomes stereo for concat
    t = torch.arange(22050) / 22050
    low = {"waveform": (0.5 * torch.sin(2 * math.pi * 440 * t))[None, None], "sample_rate": 22050}
    (both,) = audio_nodes.AudioConcat().concat(stereo, low, "before")
    assert both["sample_rate"] == RATE and both["waveform"].shape == (1, 2, RATE + RATE // 2)
    resampled = both["waveform"][0, 0, 100 : RATE - 100]
    expected = 0.5 * torch.sin(2 * math.pi * 440 * torch.arange(RATE) / RATE)[100 : RATE - 100]
    assert (resampled - expected).abs().max() < 1e-3
    assert torch.equal(both["waveform"][..., RATE:], stereo["waveform"])
    (mixed,) = audio_nodes.AudioMerge().merge(stereo, stereo, "add")  # 2 x 0.5 peaks: scaled back to 1
    assert torch.allclose(mixed["waveform"], stereo["waveform"] / stereo["waveform"].abs().max(), atol=1e-6)
    (padded,) = audio_nodes.AudioMerge().merge(low, silence, "mean")  # audio2 padded to audio1's length
    assert padded["sample_rate"] == 22050 and padded["waveform"].shape == low["waveform"].shape
    with pytest.raises(ValueError, match="has 1 channel\\(s\\), not two"):
        audio_nodes.SplitAudioChannels().separate(low)
    with pytest.raises(ValueError, match="audio_left must be mono"):
        audio_nodes.JoinAudioChannels().join(stereo, left)


def test_a_webm_is_saved_as_a_real_mp4(ws):
    """VP9 in WebM cannot be copied into the .mp4 SaveVideo names: its frames are encoded again as H.264."""
    frames = (_frames(4) * 255).to(torch.uint8).numpy()
    path = ws.input_dir / "clip.webm"
    with av.open(str(path), mode="w") as out:
        stream = out.add_stream("libvpx-vp9", rate=10)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for image in frames:
            out.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")))
        out.mux(stream.encode(None))
    (video,) = video_nodes.LoadVideo().load_video("clip.webm")
    saved = _output(ws, video_nodes.SaveVideo().save_video(video, "webm/again")["ui"]["images"][0])
    with av.open(str(saved)) as container:
        assert "mp4" in container.format.name and container.streams.video[0].codec_context.name == "h264"
    assert np.abs(_decoded(saved).astype(int) - _decoded(path)).mean() < 3
