"""Write workflows_json/wan_scail2_template.ui.json and .json: the web UI's "SCAIL-2 Character Replacement" template
(video_wan21_scail2_character_replacement of the installed comfyui-workflow-templates-json package) with its own
node graph, its two subgraphs (Base and Extend) unpacked by the templates renderer's unpacker
(scripts/templates_render.py), the tiny demo files put in place of the downloads by the renderer's rules (the tiny
SCAIL-2 file, the tiny i2v LoRA for both its LoRAs, umT5, CLIP vision, the Wan 2.1 VAE and the tiny SAM 3.1
checkpoint), the reference picture the workspace's example.png and the driving video its example.mp4 (9 frames).
Changed besides: the video's size primitives (896 x 512) are 64 x 64, the steps 2 instead of 6 (and 40 on the
switch's other side), and each chunk's start-frame expression has the two promoted values the unpacker cannot read
(see WIDGETS). As shipped otherwise: SAM3_VideoTrack on the driving video and on the reference,
SCAIL2ColoredMask in replacement mode, the Extend chunk from the Base chunk's frames (here one frame past the
9-frame clip), ColorTransfer, the batch of both and both SaveVideos.

The API file needs every class of the template registered: until SAM3_VideoTrack is offered the script stops with
that reason (tests/e2e/test_wan_scail2_template.py, which builds the same prompt, is skipped until then). The files
are not shipped yet: every shipped workflow runs in the generic workflow tests, and this one's SAM 3.1 tracking
takes minutes on the CPU.

    python scripts/wan_scail2_template_workflow.py <workspace with demo-models> [--int8]
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TEMPLATES = {False: "video_wan21_scail2_character_replacement", True: "video_wan21_scail2_character_replacement_int8"}
SIDE = 64
STEPS = 2
# node id (after unpacking) -> {widget index: value}
WIDGETS = {
    **{i: {0: SIDE} for i in (41, 42, 82, 83)},  # the video's height and width primitives (896, 512)
    **{i: {0: STEPS} for i in (35, 37, 76, 78)},  # both chunks' step primitives (6 with the LoRAs, 40 without)
    # Each chunk's first frame, (b - c) * (a - 1): b and c are the subgraph's frame_count and previous_frame_count,
    # which the instances do not store and the unpacker cannot read back (their proxied widgets are not among the
    # instance's inputs); the frontend shows them as the inner widgets' values, 81 and 5, written in here.
    **{i: {0: "(81 - 5) * (a - 1)"} for i in (40, 81)},
}


def tiny_template(int8: bool = False) -> dict:
    """The template's UI graph, unpacked, on the tiny files and the workspace's example picture and clip."""
    from scripts.workflow_files import tiny_flat_template

    return tiny_flat_template(TEMPLATES[int8], WIDGETS)


def main() -> None:
    from scripts.workflow_files import workspace_registry, write_workflow

    int8 = "--int8" in sys.argv[2:]
    registry = workspace_registry(sys.argv[1])
    missing = sorted({n["type"] for n in tiny_template(int8)["nodes"]} - set(registry.classes))
    missing = [m for m in missing if m not in ("MarkdownNote", "Note")]
    if missing:
        raise SystemExit(f"not offered yet: {', '.join(missing)}")
    write_workflow("wan_scail2_template" + ("_int8" if int8 else ""), tiny_template(int8), registry)


if __name__ == "__main__":
    main()
