"""Today's ComfyUI GLSL Shader (`comfy_extras.nodes_glsl`, newer than 0.10.0): runs a GLSL ES 3.00 fragment shader
(the WebGL 2 dialect the web UI previews it in) over up to five images, with float, int, bool and curve uniforms,
up to four outputs (fragColor0..3) and `#pragma passes N` ping-pong passes.

ComfyUI renders through ANGLE; here it is moderngl on EGL, which on a host without a GPU is Mesa's llvmpipe
(software OpenGL 4.5). The ES source is compiled as desktop GLSL 3.30+ (ES 3.00 is a subset of it, precision
qualifiers accepted and ignored): compiled as ES, llvmpipe computes mediump values and lowp/mediump texture
reads (an ES sampler's default) at half precision, where GPUs under ANGLE compute them at full precision. A
host without EGL still offers the node: running it then raises an error that says what to install."""

from __future__ import annotations

import re
import threading
from typing import Any

import numpy as np
import torch

from nodes.dynamic_inputs import DynamicSection, autogrow_prefix, combo_inputs, dynamic_combo, group
from nodes.library.curves import CurveInput

MAX_IMAGES, MAX_UNIFORMS, MAX_BOOLS, MAX_CURVES, MAX_OUTPUTS = 5, 20, 10, 4, 4
MAX_RESOLUTION = 16384

# One triangle larger than the viewport covers every pixel; v_texCoord runs 0..1 across the image.
VERTEX_SHADER = """#version 300 es
out vec2 v_texCoord;
void main() {
    vec2 corner = vec2(gl_VertexID == 1 ? 3.0 : -1.0, gl_VertexID == 2 ? 3.0 : -1.0);
    v_texCoord = corner * 0.5 + 0.5;
    gl_Position = vec4(corner, 0.0, 1.0);
}
"""

# The widget's default (ComfyUI's): the first image passed through.
DEFAULT_FRAGMENT_SHADER = """#version 300 es
precision highp float;

uniform sampler2D u_image0;
uniform vec2 u_resolution;

in vec2 v_texCoord;
layout(location = 0) out vec4 fragColor0;

void main() {
    fragColor0 = texture(u_image0, v_texCoord);
}
"""

# GL state is per thread and per context; prompts may run nodes on several threads, so renders take turns.
_GL_LOCK = threading.Lock()


def written_outputs(source: str) -> set[int]:
    """The outputs the shader writes: each fragColorN it names, or the first alone if it names none (`out vec4
    fragColor;`). A location in between that it does not write is undefined in GL; it comes back black."""
    found = {int(n) for n in re.findall(r"fragColor(\d+)", source) if int(n) < MAX_OUTPUTS}
    return found or {0}


def pass_count(source: str) -> int:
    match = re.search(r"#pragma\s+passes\s+(\d+)", source)
    return max(1, int(match.group(1))) if match else 1


ES_VERSION = re.compile(r"\A(\s*)#version\s+300\s+es\b")


def desktop_glsl(source: str, version_code: int) -> str:
    """A `#version 300 es` shader as desktop GLSL of the context's version (up to 4.50); other sources as given."""
    if version_code < 330:
        return source
    return ES_VERSION.sub(lambda m: f"{m.group(1)}#version {min(version_code, 450)} core", source, count=1)


def _gl() -> Any:
    """The moderngl module (imported when a shader runs: the server and the GPU check never need it)."""
    try:
        import moderngl
    except ImportError as ex:  # a dependency of the project; missing only in a broken install
        raise RuntimeError("GLSLShader needs the moderngl package (pip install moderngl)") from ex
    return moderngl


def _context() -> Any:
    """A headless OpenGL context, or an error naming what the host lacks."""
    gl = _gl()
    try:
        return gl.create_standalone_context(backend="egl")
    except Exception as ex:
        raise RuntimeError(
            "GLSLShader could not create a headless OpenGL context through EGL "
            f"({type(ex).__name__}: {ex}). On a host without a GPU install Mesa's EGL and software renderer "
            "(Debian/Ubuntu: libegl1 libegl-mesa0 libgl1-mesa-dri); with a GPU, its driver's EGL library."
        ) from ex


def _rgba(image: np.ndarray) -> np.ndarray:
    """An [H, W, C] float image as RGBA rows bottom-up, as GL textures are addressed."""
    channels = image.shape[-1]
    if channels == 3:
        image = np.concatenate([image, np.ones(image.shape[:2] + (1,), dtype=np.float32)], axis=-1)
    elif channels != 4:
        raise ValueError(f"GLSLShader: images must have 3 or 4 channels, got {channels}")
    return np.ascontiguousarray(image[::-1], dtype=np.float32)


def _texture(ctx: Any, width: int, height: int, components: int, data: bytes | None) -> Any:
    gl = _gl()
    tex = ctx.texture((width, height), components, data, dtype="f4")
    tex.filter = (gl.LINEAR, gl.LINEAR)
    tex.repeat_x = tex.repeat_y = False  # clamp to edge
    return tex


def _set(program: Any, name: str, value: Any) -> None:
    if name in program:  # the compiler drops the uniforms a shader declares but does not use
        program[name].value = value


def render(
    fragment_shader: str,
    width: int,
    height: int,
    batches: list[list[np.ndarray]],
    floats: list[float],
    ints: list[int],
    bools: list[bool],
    curves: list[np.ndarray],
) -> list[list[np.ndarray]]:
    """Each batch's images through the shader: per batch, MAX_OUTPUTS [height, width, 4] float32 images (the
    outputs the shader does not write are black)."""
    moderngl = _gl()

    written, passes = written_outputs(fragment_shader), pass_count(fragment_shader)
    outputs = max(written) + 1
    with _GL_LOCK:
        ctx = _context()
        try:
            try:
                program = ctx.program(
                    vertex_shader=desktop_glsl(VERTEX_SHADER, ctx.version_code),
                    fragment_shader=desktop_glsl(fragment_shader, ctx.version_code),
                )
            except moderngl.Error as ex:
                raise ValueError(f"GLSLShader: the fragment shader does not compile or link:\n{ex}") from None
            quad = ctx.vertex_array(program, [])
            targets = [_texture(ctx, width, height, 4, None) for _ in range(outputs)]
            fbo = ctx.framebuffer(color_attachments=targets)
            ping_pong = [_texture(ctx, width, height, 4, None) for _ in range(2 if passes > 1 else 0)]
            pp_fbos = [ctx.framebuffer(color_attachments=[t]) for t in ping_pong]
            _set(program, "u_resolution", (float(width), float(height)))
            for prefix, values in (("u_float", floats), ("u_int", ints), ("u_bool", bools)):
                for i, value in enumerate(values):
                    _set(program, f"{prefix}{i}", value)
            for i, lut in enumerate(curves):  # 1-row LUTs on the units after the images'
                _texture(ctx, len(lut), 1, 1, np.ascontiguousarray(lut, dtype=np.float32).tobytes()).use(MAX_IMAGES + i)
                _set(program, f"u_curve{i}", MAX_IMAGES + i)
            ctx.disable(moderngl.BLEND)
            results = []
            for images in batches:
                inputs = []
                for i, image in enumerate(images):
                    tex = _texture(ctx, image.shape[1], image.shape[0], 4, _rgba(image).tobytes())
                    tex.use(i)
                    inputs.append(tex)
                    _set(program, f"u_image{i}", i)
                for p in range(passes):
                    # the passes before the last write a ping-pong texture that the next reads as u_image0
                    target = fbo if p == passes - 1 else pp_fbos[p % 2]
                    (inputs[0] if p == 0 else ping_pong[(p - 1) % 2]).use(0)
                    _set(program, "u_pass", p)
                    target.use()
                    ctx.viewport = (0, 0, width, height)
                    target.clear(0.0, 0.0, 0.0, 0.0)
                    quad.render(moderngl.TRIANGLES, vertices=3)
                black = np.zeros((height, width, 4), dtype=np.float32)
                results.append(
                    [
                        np.frombuffer(fbo.read(components=4, attachment=i, dtype="f4"), dtype=np.float32)
                        .reshape(height, width, 4)[::-1]
                        .copy()
                        if i in written
                        else black
                        for i in range(MAX_OUTPUTS)
                    ]
                )
                for tex in inputs:
                    tex.release()
            return results
        finally:
            ctx.release()


IMAGES = autogrow_prefix("image", ("IMAGE", {}), prefix="image", minimum=1, maximum=MAX_IMAGES)
FLOATS = autogrow_prefix("float", ("FLOAT", {"default": 0.0, "forceInput": True}), "u_float", 0, MAX_UNIFORMS)
INTS = autogrow_prefix("int", ("INT", {"default": 0, "forceInput": True}), "u_int", 0, MAX_UNIFORMS)
BOOLS = autogrow_prefix("bool", ("BOOLEAN", {"default": False, "forceInput": True}), "u_bool", 0, MAX_BOOLS)
CURVE_DEFAULT = {"points": [[0.0, 0.0], [1.0, 1.0]], "interpolation": "monotone_cubic"}
CURVES = autogrow_prefix(
    "curve", ("CURVE", {"default": CURVE_DEFAULT, "socketless": True, "forceInput": True}), "u_curve", 0, MAX_CURVES
)
SIZE = {"default": 512, "min": 1, "max": MAX_RESOLUTION}


class GLSLShader:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_glsl"
    FUNCTION = "execute"
    CATEGORY = "image/shader"
    EXPERIMENTAL = True
    DESCRIPTION = "Runs a GLSL ES 3.00 fragment shader over the images; u_resolution (vec2) is the output size."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": DynamicSection(
                {
                    "fragment_shader": (
                        "STRING",
                        {
                            "default": DEFAULT_FRAGMENT_SHADER,
                            "multiline": True,
                            "tooltip": "GLSL ES 3.00 fragment shader (the WebGL 2 dialect).",
                        },
                    ),
                    "size_mode": dynamic_combo(
                        {"from_input": {}, "custom": {"width": ("INT", SIZE), "height": ("INT", SIZE)}},
                        tooltip="from_input: the first image's size; custom: the width and height given.",
                    ),
                    "images": (IMAGES[0], {**IMAGES[1], "tooltip": "u_image0..4 (sampler2D) in the shader."}),
                    "floats": (FLOATS[0], {**FLOATS[1], "tooltip": "u_float0..19 in the shader."}),
                    "ints": (INTS[0], {**INTS[1], "tooltip": "u_int0..19 in the shader."}),
                    "bools": (BOOLS[0], {**BOOLS[1], "tooltip": "u_bool0..9 in the shader."}),
                    "curves": (
                        CURVES[0],
                        {
                            **CURVES[1],
                            "tooltip": "u_curve0..3 in the shader: 1-row LUTs, texture(u_curve0, vec2(x, 0.5)).r.",
                        },
                    ),
                }
            )
        }

    RETURN_TYPES = ("IMAGE",) * MAX_OUTPUTS
    RETURN_NAMES = tuple(f"IMAGE{i}" for i in range(MAX_OUTPUTS))
    OUTPUT_TOOLTIPS = tuple(f"What the shader writes to fragColor{i} (location {i})." for i in range(MAX_OUTPUTS))

    def execute(self, fragment_shader: str, size_mode: str, **kwargs: Any):
        images = [v for v in group(kwargs, "images", IMAGES).values() if v is not None]
        if not images:
            raise ValueError("GLSLShader: at least one image is required (images.image0)")
        floats = [0.0 if v is None else float(v) for v in group(kwargs, "floats", FLOATS).values()]
        ints = [0 if v is None else int(v) for v in group(kwargs, "ints", INTS).values()]
        bools = [bool(v) for v in group(kwargs, "bools", BOOLS).values()]
        curves = [
            CurveInput.from_raw(v).to_lut().astype(np.float32)
            for v in group(kwargs, "curves", CURVES).values()
            if v is not None
        ]
        if size_mode == "custom":
            size = combo_inputs(kwargs, "size_mode")
            width, height = int(size.get("width", 512)), int(size.get("height", 512))
        elif size_mode == "from_input":
            height, width = images[0].shape[1:3]
        else:
            raise ValueError(f"GLSLShader: size_mode must be from_input or custom, not {size_mode!r}")
        count = images[0].shape[0]
        for i, image in enumerate(images[1:], 1):
            if image.shape[0] < count:
                raise ValueError(f"GLSLShader: image{i} has {image.shape[0]} images, image0 has {count}")
        batches = [[image[b].detach().cpu().float().numpy() for image in images] for b in range(count)]
        rendered = render(fragment_shader, width, height, batches, floats, ints, bools, curves)
        outputs = tuple(torch.stack([torch.from_numpy(b[i]) for b in rendered]) for i in range(MAX_OUTPUTS))
        return {"ui": _previews(images, outputs[0]), "result": outputs}


def _previews(images: list[torch.Tensor], output: torch.Tensor) -> dict[str, list]:
    """The inputs and the first output written to the temp folder: the web UI shows them on the node and runs
    the shader itself on the inputs while it is edited."""
    from nodes.image_io import PreviewImage

    inputs = [f for image in images for f in PreviewImage().save_images(image, "GLSLShader_input")["ui"]["images"]]
    return {"input_images": inputs, "images": PreviewImage().save_images(output, "GLSLShader_output")["ui"]["images"]}


NODE_CLASS_MAPPINGS = {"GLSLShader": GLSLShader}
NODE_DISPLAY_NAME_MAPPINGS = {"GLSLShader": "GLSL Shader"}
