"""Write the web UI files of the MiniMax H3 workflows from their API files (workflows_json/<name>.json ->
<name>.ui.json, for minimax_h3_t2v_video_only, minimax_h3_t2v and minimax_h3_i2v):

    python scripts/minimax_h3_workflow.py

The API file is the core of the web UI's MiniMax H3 image-to-video template's subgraph (video_minimax_h3_i2v of
the installed comfyui-workflow-templates-json: its loaders, MiniMaxH3ImageToVideo, RandomNoise, res_multistep,
the simple scheduler, BasicGuider, SamplerCustomAdvanced, VAEDecode, CreateVideo at 24 fps, SaveVideo) run as
text-to-video and video only: no first frame, no audio VAE branch, no LoRA switch, the tiny demo files, 64x32
pixels, 22 frames, 4 steps. The UI file is the same graph in the web UI's format: one node per API node, widget
values in each class's input order, a link per connection; the script checks that ui_to_api gives the API file
back.

minimax_h3_t2v.json is the text-to-video template's (video_minimax_h3_t2v) whole subgraph with its audio: the
audio VAE, VAEDecodeAudio into CreateVideo, the duration math (PrimitiveFloat, ComfyMathExpression), the LoRA
switch off as in the template (PrimitiveBoolean into two ComfySwitchNodes: the model, plain or through
LoraLoaderModelOnly with the tiny LoRA file, and the steps); the outer ResolutionSelector is left out (64x32 given
directly); 0.2 s (5 frames), 4 steps.

minimax_h3_i2v.json is the image-to-video template's (video_minimax_h3_i2v, and its continuation variant) subgraph:
the same nodes with the template's LoadImage (example.png) as MiniMaxH3ImageToVideo's first_frame."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from workflow_ui import write_ui_files  # noqa: E402

NAMES = ("minimax_h3_t2v_video_only", "minimax_h3_t2v", "minimax_h3_i2v")

if __name__ == "__main__":
    write_ui_files(NAMES)
