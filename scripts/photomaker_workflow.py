"""Write workflows_json/photomaker.ui.json, the web UI's format of the PhotoMaker workflow (workflows_json/
photomaker.json: ComfyUI's PhotoMaker example on sdxl-tiny and the tiny PhotoMaker file), and check that it converts
back to the API file.

    python -m scripts.photomaker_workflow
"""

from __future__ import annotations

from scripts.stable_cascade_workflow import write_ui

if __name__ == "__main__":
    write_ui("photomaker")
