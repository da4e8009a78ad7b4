"""ComfyUI's comfy_extras.nodes_moge (newer than 0.10.0; interfaces from Comfy-Org/ComfyUI's newest source):
LoadMoGeModel names a file of models/geometry_estimation (a ModelRef), MoGeInference runs MoGe on the images as the
`moge_infer` ModelFn (batch_size images per call) and returns a MOGE_GEOMETRY (a dict of points, depth, intrinsics,
mask, normal and the image), MoGeRender draws one of its fields as an IMAGE: disparity normalised between its 0.1 and
99.9 percentiles (grey, or through a polynomial turbo colour map), the normals as a normal map (OpenGL or DirectX
green channel), or the mask. MoGe-2 files run; MoGe-1 and MoGe-3 are refused by name (nodes/models/moge.py).
Checked against ComfyUI's code by tests/models/test_moge.py."""

from __future__ import annotations

import torch

from cluster.refs import ModelRef
from nodes.inputs import require_ref
from nodes.ksampler import call_model_fn
from nodes.loaders import make_ref, model_file
from nodes.workspace import active

MODULE = "comfy_extras.nodes_moge"
COMPONENT = "moge"
FOLDER = "geometry_estimation"
RENDER_MODES = ["depth", "depth_colored", "normal_opengl", "normal_directx", "mask"]
FIELDS = ("points", "depth", "intrinsics", "mask", "normal")


class LoadMoGeModel:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "loaders"
    RETURN_TYPES = ("MOGE_MODEL",)
    DESCRIPTION = "Loads a MoGe monocular geometry model (MoGe-2) from models/geometry_estimation."

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model_name": (active().list_files(FOLDER),)}}

    def execute(self, model_name: str) -> tuple[ModelRef]:
        from nodes.models.errors import ModelLoadError
        from nodes.models.moge import is_moge, moge_version
        from nodes.models.safetensors_io import shapes_of

        path = model_file(FOLDER, model_name, "model_name")
        try:
            keys = shapes_of(path)[0]
        except ModelLoadError as e:
            raise ValueError(f"model_name: {e}") from e
        if not is_moge(keys):
            raise ValueError(f"model_name: {model_name!r} is not a MoGe model")
        version = moge_version(keys)
        if version != "moge2":
            what = "MoGe-1" if version == "moge1" else "MoGe-3 (its sparse 3D depth refiner)"
            raise ValueError(f"model_name: {model_name!r} is {what}, which is not supported yet (MoGe-2 is)")
        return (make_ref(COMPONENT, version, [path]),)


class MoGeInference:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "image/geometry estimation"
    RETURN_TYPES = ("MOGE_GEOMETRY",)
    RETURN_NAMES = ("moge_geometry",)
    DESCRIPTION = "Estimates depth and geometry (points, normals, a validity mask, the camera) of each image with MoGe."
    SEARCH_ALIASES = ["moge", "depth", "geometry", "depth estimation", "geometry estimation"]

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "moge_model": ("MOGE_MODEL",),
                "image": ("IMAGE",),
                "resolution_level": (
                    "INT",
                    {"default": 9, "min": 0, "max": 9, "tooltip": "Detail of the estimate: 0 fastest, 9 finest."},
                ),
                "fov_x_degrees": (
                    "FLOAT",
                    {
                        "default": 0.0,
                        "min": 0.0,
                        "max": 170.0,
                        "step": 0.1,
                        "advanced": True,
                        "tooltip": "The camera's horizontal field of view, for the focal length that unprojects the "
                        "depth; 0 estimates it from the predicted points.",
                    },
                ),
                "batch_size": (
                    "INT",
                    {"default": 4, "min": 1, "max": 64, "tooltip": "Images per model call; lower it to save memory."},
                ),
                "force_projection": ("BOOLEAN", {"default": True, "advanced": True}),
                "apply_mask": (
                    "BOOLEAN",
                    {
                        "default": True,
                        "advanced": True,
                        "tooltip": "Set the invalid (masked-out, e.g. sky) pixels' points and depth to infinity; the "
                        "mask is returned either way.",
                    },
                ),
            }
        }

    async def execute(
        self,
        moge_model: ModelRef,
        image: torch.Tensor,
        resolution_level: int,
        fov_x_degrees: float,
        batch_size: int,
        force_projection: bool,
        apply_mask: bool,
    ):
        require_ref(moge_model, COMPONENT, "moge_model", "MOGE_MODEL")
        image = image[..., :3]
        params = {
            "resolution_level": int(resolution_level),
            "fov_x": float(fov_x_degrees),
            "force_projection": bool(force_projection),
            "apply_mask": bool(apply_mask),
        }
        chunks = []
        for start in range(0, image.shape[0], int(batch_size)):
            chunk = image[start : start + int(batch_size)].contiguous()
            chunks.append(await call_model_fn("moge_infer", moge_model, "moge_model", {"image": chunk}, params))
        geometry: dict[str, torch.Tensor] = {"image": image.cpu()}
        for field in FIELDS:
            values = [c[field] for c in chunks if field in c]
            if values:
                geometry[field] = torch.cat(values, dim=0)
        geometry["mask"] = geometry["mask"].bool()
        return (geometry,)


def turbo(x: torch.Tensor) -> torch.Tensor:
    """Anton Mikhailov's fifth-degree polynomial fit of the turbo colour map, [...] in 0..1 to [..., 3]."""
    x = x.clamp(0.0, 1.0)
    coeffs = (
        (0.13572138, 4.61539260, -42.66032258, 132.13108234, -152.94239396, 59.28637943),
        (0.09140261, 2.19418839, 4.84296658, -14.18503333, 4.27729857, 2.82956604),
        (0.10667330, 12.64194608, -60.58204836, 110.36276771, -89.90310912, 27.34824973),
    )
    x2 = x * x
    powers = (x, x2, x2 * x, x2 * x2, x2 * x2 * x)
    channels = []
    for c in coeffs:
        value = c[0] + c[1] * powers[0]
        for coefficient, power in zip(c[2:], powers[1:]):
            value = value + coefficient * power
        channels.append(value)
    return torch.stack(channels, dim=-1).clamp(0.0, 1.0)


def normalized_disparity(depth: torch.Tensor) -> torch.Tensor:
    """Per image: 1/depth of the finite positive pixels mapped to 0..1 between its 0.1 and 99.9 percentiles
    (clamped); other pixels 0."""
    out = torch.zeros_like(depth)
    for i, d in enumerate(depth):
        valid = torch.isfinite(d) & (d > 0)
        if not valid.any():
            continue
        disparity = torch.where(valid, 1.0 / d.clamp_min(1e-6), torch.zeros_like(d))
        lo, hi = torch.quantile(disparity[valid], 0.001), torch.quantile(disparity[valid], 0.999)
        scaled = ((disparity - lo) / (hi - lo).clamp_min(1e-6)).clamp(0.0, 1.0)
        out[i] = torch.where(valid, scaled, torch.zeros_like(scaled))
    return out


def normals_from_points(points: torch.Tensor) -> torch.Tensor:
    """Camera-space normals [B, H, W, 3] from a point map by central differences (for geometry without predicted
    normals): dy x dx, which faces the camera in MoGe's y-down frame; non-finite points give 0."""
    finite = torch.isfinite(points).all(dim=-1, keepdim=True)
    pts = torch.where(finite, points, torch.zeros_like(points))
    dx = torch.nn.functional.pad((pts[:, :, 2:] - pts[:, :, :-2]).permute(0, 3, 1, 2), (1, 1, 0, 0))
    dy = torch.nn.functional.pad((pts[:, 2:] - pts[:, :-2]).permute(0, 3, 1, 2), (0, 0, 1, 1))
    n = torch.cross(dy.permute(0, 2, 3, 1), dx.permute(0, 2, 3, 1), dim=-1)
    n = torch.nn.functional.normalize(n, dim=-1)
    return torch.where(finite, n, torch.zeros_like(n))


class MoGeRender:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "image/geometry estimation"
    RETURN_TYPES = ("IMAGE",)
    DESCRIPTION = "Draws a MoGe geometry's depth (grey or coloured), normals (as a normal map) or mask as an image."
    SEARCH_ALIASES = ["moge", "render", "geometry", "depth", "normal"]

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "moge_geometry": ("MOGE_GEOMETRY",),
                "output": (
                    RENDER_MODES,
                    {
                        "default": "depth",
                        "tooltip": "The normal maps differ in the green channel: OpenGL's points up (Blender, Unity, "
                        "glTF), DirectX's down (Unreal).",
                    },
                ),
            }
        }

    def execute(self, moge_geometry: dict, output: str):
        if not isinstance(moge_geometry, dict):
            raise ValueError("moge_geometry: expected the MOGE_GEOMETRY of MoGe Inference")
        normal_map = output in ("normal_opengl", "normal_directx")
        if output in ("depth", "depth_colored"):
            field = "depth"
        elif normal_map:
            field = "normal" if "normal" in moge_geometry else "points"
        elif output == "mask":
            field = "mask"
        else:
            raise ValueError(f"output: unknown mode {output!r} (one of {', '.join(RENDER_MODES)})")
        if field not in moge_geometry:
            raise ValueError(f"moge_geometry: it has no {field}")
        source = moge_geometry[field].float()
        if output in ("depth", "depth_colored"):
            d = normalized_disparity(source)
            image = turbo(d) if output == "depth_colored" else d.unsqueeze(-1).expand(*d.shape, 3)
        elif normal_map:
            n = source if field == "normal" else normals_from_points(source)
            # MoGe's camera looks along +z (OpenCV); a normal map's z points out of the surface, so z flips
            flip = torch.tensor([1.0, -1.0 if output == "normal_opengl" else 1.0, -1.0])
            image = (n * flip * 0.5 + 0.5).clamp(0.0, 1.0)
        else:
            image = source.unsqueeze(-1).expand(*source.shape, 3)
        return (image.contiguous().float(),)


NODE_CLASS_MAPPINGS = {"LoadMoGeModel": LoadMoGeModel, "MoGeInference": MoGeInference, "MoGeRender": MoGeRender}
NODE_DISPLAY_NAME_MAPPINGS = {
    "LoadMoGeModel": "Load MoGe Model",
    "MoGeInference": "Run MoGe Inference",
    "MoGeRender": "Render MoGe Geometry",
}
