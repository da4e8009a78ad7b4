"""Video and audio as values: ComfyUI's VIDEO (`video.VideoInput` and its two kinds) and AUDIO
(`{"waveform": [B, C, T] float tensor, "sample_rate": int}`) types, read and written with PyAV.

The node classes that use them are in `nodes.library.video` and `nodes.library.audio`; the compat
layer re-exports these types under the names node packs import from `comfy_api`."""
