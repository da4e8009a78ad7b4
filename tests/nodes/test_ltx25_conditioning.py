"""LTX-2.5's text encoder through the nodes: CLIPLoader (type ltxv) on the tiny Gemma 4 file with its projection,
CLIPTextEncode gives its projected features marked `unprocessed_ltxav_embeds` (as ComfyUI's encoder marks them:
the connectors that finish them are the transformer's), LTXVConditioning keeps the mark, and an LTX-2 model, which
has no such connectors, refuses the conditioning by name instead of reading the features as its context."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import torch

from nodes.models import ltx25_demo
from nodes.models.ltx2_demo import FILES, build_demo_ltx2
from tests.node_calls import active_workspace, call_node


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    yield from active_workspace(tmp_path_factory.mktemp("ltx25"), build_demo_ltx2, ltx25_demo.build_demo_ltx25_text)


def test_ltx25_conditioning_is_marked_and_an_ltx2_model_refuses_it(workspace) -> None:
    torch.set_num_threads(1)

    async def run():
        (clip,) = await call_node("CLIPLoader", clip_name=Path(ltx25_demo.TEXT_FILE).name, type="ltxv")
        (pos,) = await call_node("CLIPTextEncode", clip=clip, text="a fox in the snow")
        (neg,) = await call_node("CLIPTextEncode", clip=clip, text="")
        [[features, opts]] = pos
        assert features.shape == (1, 1 + len("a fox in the snow"), ltx25_demo.VIDEO_WIDTH + ltx25_demo.AUDIO_WIDTH)
        assert opts["unprocessed_ltxav_embeds"] is True
        pos, neg = await call_node("LTXVConditioning", positive=pos, negative=neg, frame_rate=25.0)
        assert pos[0][1]["unprocessed_ltxav_embeds"] is True
        model, _, _ = await call_node("CheckpointLoaderSimple", ckpt_name=Path(FILES["checkpoint"]).name)
        (video,) = await call_node("EmptyLTXVLatentVideo", width=64, height=64, length=9, batch_size=1)
        audio = {"samples": torch.zeros(1, 8, 5, 16)}  # LTXVEmptyLatentAudio's for 9 frames at 25 fps
        (latent,) = await call_node("LTXVConcatAVLatent", video_latent=video, audio_latent=audio)
        return await call_node(
            "KSampler",
            model=model,
            seed=1,
            steps=1,
            cfg=1.0,
            sampler_name="euler",
            scheduler="simple",
            positive=pos,
            negative=neg,
            latent_image=latent,
            denoise=1.0,
        )

    with pytest.raises(Exception, match="LTX-2.5.s text encoder .*or sample with an LTX-2.5 transformer"):
        asyncio.run(run())
