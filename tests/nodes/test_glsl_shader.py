"""GLSL Shader (today's ComfyUI, comfy_extras.nodes_glsl): GLSL ES 3.00 fragment shaders run headless on this CPU
host (Mesa llvmpipe through EGL), with results computed here independently."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

import nodes
from comfy_bridge.execution import PromptExecutor
from comfy_bridge.registry import NodeRegistry
from comfy_bridge.validation import validate_prompt
from nodes.library import glsl
from nodes.library.glsl import DEFAULT_FRAGMENT_SHADER, GLSLShader

HEADER = "#version 300 es\nprecision highp float;\n"
INVERT = (
    HEADER
    + """uniform sampler2D u_image0;
layout(location = 0) out vec4 fragColor0;
void main() {
    vec4 c = texelFetch(u_image0, ivec2(gl_FragCoord.xy), 0);
    fragColor0 = vec4(1.0 - c.rgb, c.a);
}
"""
)


@pytest.fixture(autouse=True)
def workspace(tmp_path):
    from nodes.workspace import Workspace, activate

    torch.set_num_threads(1)
    activate(Workspace(tmp_path / "ws").create())


def shade(source: str, images: list[torch.Tensor], size_mode: str = "from_input", **inputs) -> tuple:
    kwargs = {f"images.image{i}": image for i, image in enumerate(images)}
    return GLSLShader().execute(source, size_mode, **kwargs, **inputs)["result"]


def images(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.rand(*shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("channels", [3, 4])
def test_an_invert_shader_gives_one_minus_each_channel(channels):
    x = images(2, 5, 7, channels)
    out = shade(INVERT, [x])
    assert [tuple(o.shape) for o in out] == [(2, 5, 7, 4)] * 4
    assert torch.equal(out[0][..., :3], 1 - x[..., :3])
    # the alpha the image has, or an opaque one; the outputs the shader does not write are black
    assert torch.equal(out[0][..., 3], x[..., 3] if channels == 4 else torch.ones(2, 5, 7))
    assert all(torch.count_nonzero(o) == 0 for o in out[1:])


def test_the_default_shader_passes_the_image_through():
    x = images(1, 9, 4, 4)
    out = shade(DEFAULT_FRAGMENT_SHADER, [x])[0]
    assert (out - x).abs().max() < 1e-5  # bilinear sampling at texel centres


def test_a_mediump_shader_computes_at_full_precision():
    """ES's mediump may be half precision; on GPUs under ANGLE (ComfyUI's renderer) it is not, nor is it here."""
    x = images(1, 6, 6, 3)
    out = shade(INVERT.replace("highp", "mediump"), [x])[0]
    assert torch.equal(out[..., :3], 1 - x)


def test_uniforms_reach_the_shader_by_index():
    source = (
        HEADER
        + """uniform float u_float1; uniform int u_int2; uniform bool u_bool0; uniform vec2 u_resolution;
out vec4 fragColor;
void main() { fragColor = vec4(u_float1, float(u_int2), u_bool0 ? 1.0 : 0.0, u_resolution.x + u_resolution.y); }
"""
    )
    x = images(1, 3, 5, 3)
    out = shade(
        source,
        [x],
        "custom",
        **{"size_mode.width": 6, "size_mode.height": 2},
        **{"floats.u_float0": 9.0, "floats.u_float1": 0.25, "ints.u_int0": 1, "ints.u_int1": 1, "ints.u_int2": 7},
        **{"bools.u_bool0": True},
    )[0]
    assert out.shape == (1, 2, 6, 4)
    assert torch.equal(out, torch.tensor([0.25, 7.0, 1.0, 8.0]).expand(1, 2, 6, 4))


def test_several_outputs_and_images():
    source = (
        HEADER
        + """uniform sampler2D u_image0; uniform sampler2D u_image1;
layout(location = 0) out vec4 fragColor0;
layout(location = 2) out vec4 fragColor2;
void main() {
    ivec2 p = ivec2(gl_FragCoord.xy);
    fragColor0 = texelFetch(u_image0, p, 0) * texelFetch(u_image1, p, 0);
    fragColor2 = vec4(texelFetch(u_image1, p, 0).g);
}
"""
    )
    a, b = images(2, 4, 4, 4, seed=1), images(2, 4, 4, 4, seed=2)
    out = shade(source, [a, b])
    assert torch.equal(out[0], a * b)
    assert torch.count_nonzero(out[1]) == 0  # fragColor1 is not written
    assert torch.equal(out[2], b[..., 1:2].expand(2, 4, 4, 4))
    assert torch.count_nonzero(out[3]) == 0


def test_passes_feed_each_other():
    source = (
        HEADER.replace("\n", "\n#pragma passes 3\n", 1)
        + """uniform sampler2D u_image0; uniform int u_pass;
layout(location = 0) out vec4 fragColor0;
void main() {
    vec4 c = texelFetch(u_image0, ivec2(gl_FragCoord.xy), 0);
    fragColor0 = u_pass == 1 ? c * 2.0 : c + 0.125;
}
"""
    )
    x = images(1, 3, 3, 4)
    assert torch.equal(shade(source, [x])[0], (x + 0.125) * 2 + 0.125)


def test_curves_are_lookup_tables():
    """A linear curve from (0, 1) to (1, 0) sampled as the templates sample it: the image inverted."""
    source = (
        HEADER
        + """uniform sampler2D u_image0; uniform sampler2D u_curve0;
layout(location = 0) out vec4 fragColor0;
float curve(float v) {
    float pos = clamp(v, 0.0, 1.0) * 255.0;
    int lo = int(floor(pos));
    float a = texelFetch(u_curve0, ivec2(lo, 0), 0).r, b = texelFetch(u_curve0, ivec2(min(lo + 1, 255), 0), 0).r;
    return a + (pos - float(lo)) * (b - a);
}
void main() {
    vec4 c = texelFetch(u_image0, ivec2(gl_FragCoord.xy), 0);
    fragColor0 = vec4(curve(c.r), curve(c.g), curve(c.b), 1.0);
}
"""
    )
    x = images(1, 4, 6, 3)
    curve = {"points": [[0.0, 1.0], [1.0, 0.0]], "interpolation": "linear"}
    out = shade(source, [x], **{"curves.u_curve0": curve})[0]
    assert (out[..., :3] - (1 - x)).abs().max() < 1e-5


def test_the_templates_shaders_run():
    """Every GLSL Shader of the web UI's basic_image_color_adjustment template compiles and runs here; its levels
    shader at its neutral settings (black 0, white 255, gamma 1) leaves the image as it is."""
    import comfyui_workflow_templates_json

    path = Path(comfyui_workflow_templates_json.__file__).parent / "templates" / "basic_image_color_adjustment.json"
    workflow = json.loads(path.read_text())
    shaders = [
        n["widgets_values"][0]
        for graph in [workflow, *workflow.get("definitions", {}).get("subgraphs", [])]
        for n in graph["nodes"]
        if n["type"] == "GLSLShader"
    ]
    assert len(shaders) >= 5
    x = images(1, 8, 8, 3)
    for source in shaders:  # (at all-zero settings some of them divide by zero, as they would in ComfyUI)
        assert shade(source, [x])[0].shape == (1, 8, 8, 4)
    levels = next(s for s in shaders if "Levels Adjustment" in s)
    floats = {"floats.u_float0": 0.0, "floats.u_float1": 255.0, "floats.u_float2": 1.0, "floats.u_float4": 255.0}
    out = shade(levels, [x], **floats, **{"floats.u_float3": 0.0, "ints.u_int0": 0})[0]
    assert (out[..., :3] - x).abs().max() < 1e-5


def test_a_shader_that_does_not_compile_says_why():
    with pytest.raises(ValueError, match="does not compile") as info:
        shade(HEADER + "out vec4 fragColor0;\nvoid main() { fragColor0 = undefined_name; }\n", [images(1, 2, 2, 3)])
    assert "undefined_name" in str(info.value)


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="at least one image"):
        GLSLShader().execute(INVERT, "from_input")
    with pytest.raises(ValueError, match="image1 has 1 images, image0 has 2"):
        shade(INVERT, [images(2, 2, 2, 3), images(1, 2, 2, 3)])


def test_without_egl_the_error_names_what_to_install(monkeypatch):
    import moderngl

    def no_egl(**kwargs):
        raise RuntimeError("eglGetDisplay failed")

    monkeypatch.setattr(moderngl, "create_standalone_context", no_egl)
    with pytest.raises(RuntimeError, match="libegl-mesa0"):
        glsl.render(INVERT, 2, 2, [[np.zeros((2, 2, 3), np.float32)]], [], [], [], [])


class Keep:
    """Test output node: the value it is given."""

    KEPT: list = []

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("*", {})}}

    RETURN_TYPES = ()
    FUNCTION = "run"
    OUTPUT_NODE = True

    def run(self, value):
        Keep.KEPT.append(value)
        return {}


async def test_a_prompt_sends_the_dynamic_inputs_as_the_web_ui_does():
    registry = NodeRegistry()
    registry.add_builtin({**nodes.NODE_CLASS_MAPPINGS, "Keep": Keep})
    source = (
        HEADER
        + """uniform sampler2D u_image0; uniform float u_float0;
layout(location = 0) out vec4 fragColor0;
void main() { fragColor0 = vec4(texelFetch(u_image0, ivec2(gl_FragCoord.xy), 0).rgb * u_float0, 1.0); }
"""
    )
    prompt = {
        "img": {"class_type": "EmptyImage", "inputs": {"width": 5, "height": 3, "batch_size": 1, "color": 0x336699}},
        "f": {"class_type": "PrimitiveFloat", "inputs": {"value": 0.5}},
        "s": {
            "class_type": "GLSLShader",
            "inputs": {
                "fragment_shader": source,
                "size_mode": "from_input",
                "images.image0": ["img", 0],
                "floats.u_float0": ["f", 0],
            },
        },
        "k": {"class_type": "Keep", "inputs": {"value": ["s", 0]}},
    }

    class Sink:
        client_id = last_node_id = None

        def send_sync(self, *args, **kwargs):
            pass

    ok, error, outputs, node_errors = await validate_prompt(registry, "p", prompt, None)
    assert ok, (error, node_errors)
    executor = PromptExecutor(registry, Sink(), cache_type="classic", cache_size=0)
    Keep.KEPT.clear()
    await executor.execute_async(prompt, "p", {}, outputs)
    assert executor.success, executor.status_messages
    color = torch.tensor([0x33, 0x66, 0x99]) / 255.0
    assert torch.equal(Keep.KEPT[0][..., :3], (color.float() * 0.5).expand(1, 3, 5, 3))
    ui = executor.history_result["outputs"]["s"]
    assert len(ui["images"]) == 1 and len(ui["input_images"]) == 1
