"""QwenImage21Cache as the newest ComfyUI source declares it (comfy_extras/nodes_qwen.py): a MODEL in, a MODEL out,
`device` auto|gpu|cpu|off and `dtype` default|int8|int4, experimental. No cache is kept here (every step recomputes
the text and reference keys, ComfyUI's lossless off/default), so the model passes through unchanged."""
from __future__ import annotations

import json

import pytest

from cluster.refs import ModelRef
from comfy_bridge.registry import build_registry
from nodes.library.qwen import QwenImage21Cache

MODEL = ModelRef("diffusion_model", "qwen_image21", ("qwen_image_2.1.safetensors",), ("0" * 64,))


def test_object_info_has_todays_interface():
    info = json.loads(json.dumps(build_registry(None, load_custom_nodes=False).node_info("QwenImage21Cache")))
    required = info["input"]["required"]
    assert list(required) == ["model", "device", "dtype"]
    assert required["model"][0] == "MODEL"
    assert (required["device"][0], required["device"][1]["default"]) == (["auto", "gpu", "cpu", "off"], "auto")
    assert (required["dtype"][0], required["dtype"][1]["default"]) == (["default", "int8", "int4"], "default")
    assert (info["output"], info["display_name"], info["category"], info["experimental"]) == \
        (["MODEL"], "Qwen Image 2.1 Cache", "model/conditioning/qwen image", True)
    assert info["python_module"] == "comfy_extras.nodes_qwen"


@pytest.mark.parametrize("device,dtype", [("auto", "default"), ("off", "default"), ("cpu", "int8")])
def test_the_model_passes_through_unchanged(device, dtype):
    assert QwenImage21Cache().execute(MODEL, device, dtype) == (MODEL,)


def test_bad_input_is_refused_by_name():
    with pytest.raises(ValueError, match="device"):
        QwenImage21Cache().execute(MODEL, "tpu", "default")
    with pytest.raises(ValueError, match="dtype"):
        QwenImage21Cache().execute(MODEL, "auto", "fp8")
    with pytest.raises(ValueError, match="MODEL"):
        QwenImage21Cache().execute("not a model", "auto", "default")
