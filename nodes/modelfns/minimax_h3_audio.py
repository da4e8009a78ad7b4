"""MiniMax H3's audio VAE decode as a ModelFn (VAEDecodeAudio): the normalised audio latent in, the stereo
waveform out (nodes.models.minimax_h3_audio)."""

from __future__ import annotations

from typing import Any

import torch

from cluster.call import NoParams
from cluster.modelfn import ModelFn, register
from cluster.refs import ModelRef


@register
class MiniMaxH3AudioDecodeFn(ModelFn):
    name = "minimax_h3_audio_decode"

    def setup_io(self) -> None:
        self.add_input("latent")
        self.add_output("waveform")

    def load_model(self, ref: ModelRef) -> Any:
        from nodes.models.minimax_h3_audio import load_audio_vae
        from nodes.models.safetensors_io import load_state_dict

        path = ref.sources[0]
        return load_audio_vae(load_state_dict(path, ref.digests[0] if ref.digests else None), path)

    def execute(self, model: Any, inputs: dict[str, Any], params: NoParams) -> dict[str, torch.Tensor]:
        from nodes.models.minimax_h3_audio import decode

        return {"waveform": decode(model, inputs["latent"])}
