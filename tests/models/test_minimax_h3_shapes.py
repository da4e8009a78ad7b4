"""MiniMax H3's latent arithmetic against diffusers' MiniMax H3 pipeline helpers (an independent port of the
reference) and the worked values of the web UI's template (its note: 0.98 MP at 16:9 is 1344x768; 2 s at 24 fps
is 56 frames through its math expression)."""

from __future__ import annotations

import pytest
from diffusers.modular_pipelines.minimax_h3.modular_pipeline import (
    align_num_frames,
    audio_latent_num_frames,
    resolve_canvas_size,
    video_latent_num_frames,
)

from nodes.models.minimax_h3_shapes import (
    adapt_canvas,
    align_frame_count,
    av_latent_shapes,
    temporal_shape,
    video_latent_frames,
)


@pytest.mark.parametrize("length", [1, 4, 5, 6, 21, 22, 53, 73, 124, 125, 362])
def test_frames_equal_diffusers(length):
    aligned = align_num_frames(max(5, length), 17, 5)
    assert align_frame_count(length) == aligned
    assert temporal_shape(length) == (
        aligned,
        video_latent_num_frames(aligned, 17, 5),
        audio_latent_num_frames(aligned),
    )


def test_known_values():
    assert temporal_shape(124) == (124, 37, 207)  # the ~5 s default
    assert temporal_shape(48) == (56, 17, 93)  # the template's 2 s through its math expression lands on 56
    assert av_latent_shapes(1344, 768, 124) == ((1, 24, 37, 48, 84), (1, 32, 2, 207))
    with pytest.raises(ValueError, match="17k\\+5"):
        video_latent_frames(30)


@pytest.mark.parametrize("aspect", [(16, 9), (9, 16), (1, 1), (4, 3), (21, 9), (1, 3), (1920, 1080), (1000, 999)])
def test_canvas_equals_diffusers(aspect):
    height, width = resolve_canvas_size(*aspect, 32, 768, 768 * 1344)
    assert adapt_canvas(*aspect) == (width, height)


def test_bad_canvas_refused():
    with pytest.raises(ValueError, match="positive"):
        adapt_canvas(0, 768)
