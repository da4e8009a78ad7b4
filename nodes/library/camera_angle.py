"""ComfyUI's comfy_extras.nodes_camera_angle (newer than 0.10.0; the newest Comfy-Org source): CameraAngle, the
multi-angle templates' camera picker for Qwen-Image-Edit's camera LoRAs. It names a shot in plain English for the
prompt (one of eight views around the subject by azimuth, four heights by elevation, three distances by zoom)
and gives the web UI's 3D preview its camera (LOAD3D_CAMERA: position orbiting a unit cube standing on the
ground, looking at its centre). Out-of-range values are clamped, as ComfyUI does."""

from __future__ import annotations

import math

MODULE = "comfy_extras.nodes_camera_angle"
HORIZONTAL = (0, 360)
VERTICAL = (-30, 60)
ZOOM = (0.0, 10.0)
VIEWS = (
    "front view",
    "front-right quarter view",
    "right side view",
    "back-right quarter view",
    "back view",
    "back-left quarter view",
    "left side view",
    "front-left quarter view",
)
# (upper bound, exclusive; None: the rest) -> term
HEIGHTS = ((-15, "low-angle shot"), (15, "eye-level shot"), (45, "elevated shot"), (None, "high-angle shot"))
DISTANCES = ((2, "wide shot"), (6, "medium shot"), (None, "close-up"))
CENTRE = (0.0, 0.5, 0.0)  # the subject cube's centre, as the web UI's preview places it
NEAR, FAR, FOV = 3.2, 6.0, 35.0  # camera distance at zoom 10 and 0; field of view in degrees


def _term(value: float, bands) -> str:
    return next(term for upper, term in bands if upper is None or value < upper)


def shot_description(horizontal: float, vertical: float, zoom: float) -> str:
    view = VIEWS[int(((horizontal % 360) + 22.5) // 45) % len(VIEWS)]  # 45-degree sectors centred on each view
    return f"{view} {_term(vertical, HEIGHTS)} {_term(zoom, DISTANCES)}"


def camera_info(horizontal: float, vertical: float, zoom: float) -> dict:
    yaw, pitch = math.radians(horizontal), math.radians(vertical)
    distance = FAR - (FAR - NEAR) * (zoom / ZOOM[1])
    cx, cy, cz = CENTRE
    return {
        "position": {
            "x": cx + distance * math.cos(pitch) * math.sin(yaw),
            "y": cy + distance * math.sin(pitch),
            "z": cz + distance * math.cos(pitch) * math.cos(yaw),
        },
        "target": {"x": cx, "y": cy, "z": cz},
        "zoom": 1.0,
        "cameraType": "perspective",
        "fov": FOV,
    }


class CameraAngle:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "horizontal_angle": (
                    "INT",
                    {
                        "default": 0,
                        "min": HORIZONTAL[0],
                        "max": HORIZONTAL[1],
                        "step": 1,
                        "tooltip": "Azimuth around the subject in degrees: 0 front, 90 right, 180 back.",
                    },
                ),
                "vertical_angle": (
                    "INT",
                    {
                        "default": 0,
                        "min": VERTICAL[0],
                        "max": VERTICAL[1],
                        "step": 1,
                        "tooltip": "Elevation in degrees: below 0 looks up, above looks down.",
                    },
                ),
                "zoom": (
                    "FLOAT",
                    {
                        "default": 5.0,
                        "min": ZOOM[0],
                        "max": ZOOM[1],
                        "step": 0.1,
                        "tooltip": "How close the camera is: 0 a wide shot, 10 a close-up.",
                    },
                ),
            },
            "optional": {
                "image": ("IMAGE", {"tooltip": "Shown on the subject in the web UI's 3D preview; not used here."}),
                "view": (
                    "STRING",
                    {"widgetType": "CAMERA_ANGLE_VIEW", "default": "", "socketless": True, "multiline": False},
                ),
            },
        }

    RETURN_TYPES = ("LOAD3D_CAMERA", "STRING")
    RETURN_NAMES = ("camera_info", "prompt")
    FUNCTION = "execute"
    CATEGORY = "3d"
    DESCRIPTION = (
        "Picks a camera angle around a subject: a plain-English shot description for prompts and the "
        "camera for 3D nodes."
    )
    SEARCH_ALIASES = ["multi angle", "camera view", "orbit camera", "shot angle", "camera prompt"]
    RELATIVE_PYTHON_MODULE = MODULE

    def execute(self, horizontal_angle: int, vertical_angle: int, zoom: float, image=None, view=None):
        try:
            h = min(max(int(horizontal_angle), HORIZONTAL[0]), HORIZONTAL[1])
            v = min(max(int(vertical_angle), VERTICAL[0]), VERTICAL[1])
            z = min(max(float(zoom), ZOOM[0]), ZOOM[1])
        except (TypeError, ValueError):
            raise ValueError("horizontal_angle, vertical_angle and zoom must be numbers") from None
        return (camera_info(h, v, z), shot_description(h, v, z))


NODE_CLASS_MAPPINGS = {"CameraAngle": CameraAngle}
NODE_DISPLAY_NAME_MAPPINGS = {"CameraAngle": "Camera Angle"}
