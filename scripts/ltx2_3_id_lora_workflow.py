"""Write workflows_json/ltx2_3_id_lora.ui.json and .json: the web UI's "LTX-2.3 ID-LoRA" template (video_ltx2_3_id_lora:
a talking video whose voice is the reference clip's, LTXVReferenceAudio with the ID-LoRA) through
scripts/ltx2_3_i2v_workflow.py's rules: its node graph unpacked, ltx2-tiny's files in place of the downloads (the
ID-LoRA the tiny LoRA in ID-LoRA's layout, the distilled LoRA the tiny LTX-2 LoRA), the picture the workspace's example.png, the reference voice
its example.wav, the noise seeds fixed, Width / Height and the picture shrunk, Duration 1 s. As shipped otherwise:
the ID-LoRA at 1 and the distilled LoRA at 0.5, LTXVReferenceAudio's identity guidance at 3, the two-pass schedule
(ManualSigmas, euler, cfg 1) with the x2 latent upsampler between, VAE Decode (Tiled), the audio VAE from the
checkpoint, CreateVideo and SaveVideo.

    python scripts/ltx2_3_id_lora_workflow.py <workspace with demo-models>
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TEMPLATE = "video_ltx2_3_id_lora"
NAME = "ltx2_3_id_lora"


def tiny_template() -> dict:
    from scripts.ltx2_3_i2v_workflow import tiny_template as tiny
    from scripts.templates_render import AUDIO_FILE

    flat = tiny(TEMPLATE)
    for node in flat["nodes"]:
        widgets = node.get("widgets_values")
        if node["type"] == "LoadAudio" and isinstance(widgets, list) and AUDIO_FILE.search(str(widgets[0])):
            widgets[0] = "example.wav"
    return flat


def main() -> None:
    from scripts.workflow_files import workspace_registry, write_workflow

    write_workflow(NAME, tiny_template(), workspace_registry(sys.argv[1]))


if __name__ == "__main__":
    main()
