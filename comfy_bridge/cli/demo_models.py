"""`comfy-cluster demo-models`, and the first start on an empty workspace: the tiny offline models (and
the example input image) that make every bundled workflow run with no download."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from comfy_bridge.cli.workspace_args import open_workspace
from nodes.workspace import Workspace

log = logging.getLogger("comfy_cluster")


def ensure_demo_models(ws: Workspace) -> None:
    """First start on an empty workspace: build the tiny demo models (and the example input image
    the img2img and ControlNet workflows load, the example clip the Wan VACE workflow loads, the example
    sound audio-to-video templates load and the example painting the Anima LLLite inpainting workflow's Painter
    loads) so a workflow runs with no download."""
    example = ws.input_dir / "example.png"
    if not example.exists():
        write_example_image(example)
    clip = ws.input_dir / "example.mp4"
    if not clip.exists():
        write_example_video(clip)
    sound = ws.input_dir / "example.wav"
    if not sound.exists():
        write_example_audio(sound)
    painting = ws.input_dir / "example_painting.png"
    if not painting.exists():
        write_example_painting(painting)
    sound_clip = ws.input_dir / "example_with_sound.mp4"
    if not sound_clip.exists() and clip.exists():
        write_example_sound_video(sound_clip, clip, sound)
    if ws.list_files("checkpoints"):
        return
    from nodes.models.demo import build_demo_models

    log.info("no checkpoint in %s: building the demo models", ws.models_dir)
    build_demo_models(ws.models_dir)


def write_example_image(path: Path, size: int = 128) -> None:
    """A deterministic picture: a colour gradient with a disc, enough structure for img2img and ControlNet."""
    import numpy as np
    from PIL import Image

    from nodes.output_claims import write_atomic

    y, x = np.mgrid[0:size, 0:size] / (size - 1)
    disc = ((x - 0.5) ** 2 + (y - 0.5) ** 2 < 0.09).astype(float)
    rgb = np.stack([x, y, 0.5 * (1 - disc) + disc], axis=-1)
    write_atomic(path, lambda tmp: Image.fromarray((rgb * 255).round().astype("uint8")).save(tmp, format="PNG"))


def write_example_painting(path: Path, size: int = 64) -> None:
    """What the web UI's Painter uploads when one paints (the Anima LLLite inpainting workflow's mask): a white disc
    on a transparent canvas, RGBA, so the painted coverage is part of the picture."""
    import numpy as np
    from PIL import Image

    from nodes.output_claims import write_atomic

    y, x = np.mgrid[0:size, 0:size] / (size - 1)
    disc = ((x - 0.5) ** 2 + (y - 0.5) ** 2 < 0.09).astype("uint8") * 255
    rgba = np.stack([disc, disc, disc, disc], axis=-1)
    write_atomic(path, lambda tmp: Image.fromarray(rgba, mode="RGBA").save(tmp, format="PNG"))


def write_example_audio(path: Path, rate: int = 44100, seconds: float = 1.0) -> None:
    """A deterministic stereo 16-bit WAV (the standard library writes it): a 440 Hz tone left, 660 Hz right."""
    import wave

    import numpy as np

    from nodes.output_claims import write_atomic

    t = np.arange(int(rate * seconds)) / rate
    samples = (0.3 * np.stack([np.sin(2 * np.pi * 440 * t), np.sin(2 * np.pi * 660 * t)], axis=1) * 32767).round()

    def write(tmp: str) -> None:
        with wave.open(tmp, "wb") as f:
            f.setnchannels(2)
            f.setsampwidth(2)
            f.setframerate(rate)
            f.writeframes(samples.astype("<i2").tobytes())

    write_atomic(path, write)


def write_example_video(path: Path, size: int = 64, frames: int = 9) -> None:
    """A deterministic 16 fps clip: a disc crossing a colour gradient. Encoded losslessly (x264 at qp 0), so
    its decoded frames are the same whatever bytes an encoder run gives. Skipped, with a warning, where PyAV is
    not installed (the GPU machine brings only what its check needs): the workspace then has no example video."""
    try:
        import av
    except ImportError:
        logging.getLogger(__name__).warning("PyAV is not installed: no example video written to %s", path)
        return
    import numpy as np

    from nodes.output_claims import write_atomic

    y, x = np.mgrid[0:size, 0:size] / (size - 1)

    def frame(t: float) -> np.ndarray:
        disc = ((x - 0.2 - 0.6 * t) ** 2 + (y - 0.5) ** 2 < 0.04).astype(float)
        return (np.stack([x, y, 0.5 * (1 - disc) + disc], axis=-1) * 255).round().astype("uint8")

    def write(tmp: str) -> None:
        with av.open(tmp, "w", format="mp4") as container:
            stream = container.add_stream("libx264", rate=16, options={"qp": "0", "preset": "ultrafast"})
            stream.width = stream.height = size
            stream.pix_fmt = "yuv444p"
            for i in range(frames):
                container.mux(stream.encode(av.VideoFrame.from_ndarray(frame(i / (frames - 1)), format="rgb24")))
            container.mux(stream.encode())

    write_atomic(path, write)


def write_example_sound_video(path: Path, clip: Path, sound: Path, frames: int = 5) -> None:
    """The example clip's first `frames` frames (re-encoded losslessly) with the example sound as its AAC track: the
    video that templates taking a video's sound load (VOID's inpainting template trims it onto its outputs). Five
    frames: VOID's shortest length, and its SAM 3.1 mask costs seconds a frame on a CPU. Skipped, with a warning,
    where PyAV is not installed (as write_example_video)."""
    try:
        import av
    except ImportError:
        logging.getLogger(__name__).warning("PyAV is not installed: no example video with sound written to %s", path)
        return

    from nodes.output_claims import write_atomic

    def write(tmp: str) -> None:
        with av.open(str(clip)) as video, av.open(str(sound)) as audio:
            images = [f.to_ndarray(format="rgb24") for f in video.decode(video=0)][:frames]
            rate = video.streams.video[0].average_rate
            chunks = list(audio.decode(audio=0))
            with av.open(tmp, "w", format="mp4") as out:
                v = out.add_stream("libx264", rate=rate, options={"qp": "0", "preset": "ultrafast"})
                v.width, v.height, v.pix_fmt = images[0].shape[1], images[0].shape[0], "yuv444p"
                a = out.add_stream("aac", rate=chunks[0].sample_rate)
                for image in images:
                    out.mux(v.encode(av.VideoFrame.from_ndarray(image, format="rgb24")))
                out.mux(v.encode())
                for chunk in chunks:
                    chunk.pts = None
                    out.mux(a.encode(chunk))
                out.mux(a.encode())

    write_atomic(path, write)


def cmd_demo_models(args: argparse.Namespace) -> int:
    ws = open_workspace(args)
    from nodes.models.demo import build_demo_models

    for path in build_demo_models(ws.models_dir):
        print(path)
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    demo = sub.add_parser("demo-models", help="build the tiny offline demo models into the workspace")
    demo.add_argument("--workspace", default=None)
    demo.set_defaults(func=cmd_demo_models)
