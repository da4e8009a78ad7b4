"""LTX-2's audio VAE as ModelFns (nodes.models.ltx2_audio): decode (the audio latent in, the stereo waveform out)
and encode (a log-mel spectrogram in, the normalised audio latent out)."""

from __future__ import annotations

from typing import Any

import torch

from cluster.call import NoParams
from cluster.modelfn import ModelFn, register
from cluster.refs import ModelRef


@register
class LTX2AudioDecodeFn(ModelFn):
    name = "ltx2_audio_decode"

    def setup_io(self) -> None:
        self.add_input("latent")
        self.add_output("waveform")

    def load_model(self, ref: ModelRef) -> Any:
        from nodes.models.ltx2_audio import read_audio_vae

        return read_audio_vae(ref.sources[0])

    def execute(self, model: Any, inputs: dict[str, Any], params: NoParams) -> dict[str, torch.Tensor]:
        return {"waveform": model.decode(inputs["latent"])}


@register
class LTX2AudioEncodeFn(LTX2AudioDecodeFn):
    name = "ltx2_audio_encode"

    def setup_io(self) -> None:
        self.add_input("mel")
        self.add_output("latent")

    def execute(self, model: Any, inputs: dict[str, Any], params: NoParams) -> dict[str, torch.Tensor]:
        return {"latent": model.encode(inputs["mel"])}
