"""`protocol`: websocket binary event types, as ComfyUI names them. The one definition: the server's
frames (server/websocket.py) and the engine's previews (execution/progress.py) use these too."""


class BinaryEventTypes:
    PREVIEW_IMAGE = 1
    UNENCODED_PREVIEW_IMAGE = 2
    TEXT = 3
    PREVIEW_IMAGE_WITH_METADATA = 4
