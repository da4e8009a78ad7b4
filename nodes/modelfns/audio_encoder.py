"""Audio encoding as a ModelFn (ComfyUI's AudioEncoderEncode): a 16 kHz waveform in, the encoder's last hidden state
and every layer's hidden states out (nodes.models.audio_encoder)."""

from __future__ import annotations

from typing import Any

import torch

from cluster.call import NoParams
from cluster.modelfn import ModelFn, register
from cluster.refs import ModelRef


@register
class AudioEncodeFn(ModelFn):
    """inputs: waveform [B, channels, samples] at 16 kHz; outputs: encoded [B, frames, width], all_layers
    [layers + 1, B, frames, width]."""

    name = "audio_encode"

    def setup_io(self) -> None:
        self.add_input("waveform")
        self.add_output("encoded")
        self.add_output("all_layers")

    def load_model(self, ref: ModelRef) -> Any:
        from nodes.models.audio_encoder import load_audio_encoder
        from nodes.models.safetensors_io import load_state_dict

        return load_audio_encoder(load_state_dict(ref.sources[0], ref.digests[0]), ref.sources[0])

    def execute(self, model: Any, inputs: dict[str, Any], params: NoParams) -> dict[str, torch.Tensor]:
        encoded, all_layers = model.encode(inputs["waveform"])
        return {"encoded": encoded, "all_layers": all_layers}
