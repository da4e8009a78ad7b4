"""Small node classes the engine tests run (our own, in the shapes ComfyUI's test pack uses)."""

from __future__ import annotations

import asyncio
import time

import torch

from comfy_bridge.compat.comfy_api.latest import _io as io
from comfy_bridge.execution.graph_utils import ExecutionBlocker, GraphBuilder

CALLS: list[str] = []  # node class names in call order, reset per test


class Const:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("FLOAT", {"default": 0.0, "min": -10.0, "max": 10.0})}}

    RETURN_TYPES = ("FLOAT",)
    FUNCTION = "run"

    def run(self, value):
        CALLS.append("Const")
        return (value,)


class Image:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {"value": ("FLOAT", {"default": 0.0}), "size": ("INT", {"default": 4, "min": 1, "max": 64})}
        }

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "run"

    def run(self, value, size):
        CALLS.append("Image")
        return (torch.full((1, size, size, 3), float(value)),)


class Add:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"a": ("FLOAT,IMAGE",), "b": ("FLOAT,IMAGE",)}}

    RETURN_TYPES = ("FLOAT",)
    FUNCTION = "run"

    def run(self, a, b):
        CALLS.append("Add")
        return (a + b,)


class Output:
    """An output node reporting what it received as UI text."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("*",)}, "hidden": {"unique_id": "UNIQUE_ID"}}

    RETURN_TYPES = ()
    FUNCTION = "run"
    OUTPUT_NODE = True

    def run(self, value, unique_id):
        CALLS.append("Output")
        shown = value.mean().item() if isinstance(value, torch.Tensor) else value
        return {"ui": {"values": [shown]}}


class Changing:
    """IS_CHANGED returns NaN when asked to: the node must run every time."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("FLOAT",), "always": ("BOOLEAN", {"default": False})}}

    RETURN_TYPES = ("FLOAT",)
    FUNCTION = "run"

    @classmethod
    def IS_CHANGED(cls, value=None, always=False):
        return float("nan") if always else value

    def run(self, value, always):
        CALLS.append("Changing")
        return (value,)


class LazySwitch:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"pick_a": ("BOOLEAN",), "a": ("FLOAT", {"lazy": True}), "b": ("FLOAT", {"lazy": True})}}

    RETURN_TYPES = ("FLOAT",)
    FUNCTION = "run"

    def check_lazy_status(self, pick_a, a=None, b=None):
        return ["a"] if pick_a else ["b"]

    def run(self, pick_a, a=None, b=None):
        CALLS.append("LazySwitch")
        return (a if pick_a else b,)


class AsyncLazySwitch(LazySwitch):
    async def check_lazy_status(self, pick_a, a=None, b=None):
        await asyncio.sleep(0.01)
        return ["a"] if pick_a else ["b"]


class MakeList:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"count": ("INT", {"default": 3})}}

    RETURN_TYPES = ("FLOAT",)
    OUTPUT_IS_LIST = (True,)
    FUNCTION = "run"

    def run(self, count):
        return ([float(i) for i in range(count)],)


class SumList:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"values": ("FLOAT",)}}

    RETURN_TYPES = ("FLOAT",)
    INPUT_IS_LIST = True
    FUNCTION = "run"

    def run(self, values):
        return (float(sum(v for v in values)),)


class Double:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("FLOAT",)}}

    RETURN_TYPES = ("FLOAT",)
    FUNCTION = "run"

    def run(self, value):
        CALLS.append("Double")
        return (value * 2,)


class Blocker:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "value": ("FLOAT",),
                "block_at": ("FLOAT", {"default": -1.0}),
                "message": ("STRING", {"default": ""}),
            }
        }

    RETURN_TYPES = ("FLOAT",)
    FUNCTION = "run"

    def run(self, value, block_at, message):
        if value == block_at:
            return (ExecutionBlocker(message or None),)
        return (value,)


class Sleep:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("FLOAT",), "seconds": ("FLOAT", {"default": 0.2})}}

    RETURN_TYPES = ("FLOAT",)
    FUNCTION = "run"

    async def run(self, value, seconds):
        await asyncio.sleep(seconds)
        return (value,)


class Rendezvous:
    """Waits until `parties` Rendezvous nodes of the process are running at once (or fails after 60 s):
    it finishes only if the engine runs them concurrently, whatever the machine's speed."""

    arrived = 0

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("FLOAT",), "parties": ("INT", {"default": 2})}}

    RETURN_TYPES = ("FLOAT",)
    FUNCTION = "run"

    async def run(self, value, parties):
        Rendezvous.arrived += 1
        for _ in range(6000):
            if Rendezvous.arrived >= parties:
                return (value,)
            await asyncio.sleep(0.01)
        raise TimeoutError(f"only {Rendezvous.arrived} of {parties} ran at once")


class SyncSleep(Sleep):
    def run(self, value, seconds):
        time.sleep(seconds)
        return (value,)


class Fail:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("FLOAT",)}}

    RETURN_TYPES = ("FLOAT",)
    FUNCTION = "run"

    def run(self, value):
        raise RuntimeError("deliberate failure")


class AsyncFail(Fail):
    async def run(self, value):
        await asyncio.sleep(0.01)
        raise ValueError("deliberate async failure")


class Progress:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("FLOAT",), "steps": ("INT", {"default": 3})}}

    RETURN_TYPES = ("FLOAT",)
    FUNCTION = "run"

    def run(self, value, steps):
        from comfy.utils import ProgressBar

        bar = ProgressBar(steps)
        for _ in range(steps):
            bar.update(1)
        return (value,)


class WaitForInterrupt:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("FLOAT",)}}

    RETURN_TYPES = ("FLOAT",)
    FUNCTION = "run"

    def run(self, value):
        from nodes import progress

        progress.interrupt()
        progress.throw_if_interrupted()
        return (value,)


class Repeat:
    """Expands into a chain of `times` Double nodes (ids from GraphBuilder's default prefix)."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("FLOAT",), "times": ("INT", {"default": 2})}}

    RETURN_TYPES = ("FLOAT",)
    FUNCTION = "run"

    def run(self, value, times):
        g = GraphBuilder()
        current: object = value
        for _ in range(times):
            current = g.node("Double", value=current).out(0)
        return {"result": (current,), "expand": g.finalize()}


class CycleMaker:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("FLOAT",)}}

    RETURN_TYPES = ("FLOAT",)
    FUNCTION = "run"

    def run(self, value):
        g = GraphBuilder()
        a = g.node("Add", a=value)
        b = g.node("Add", a=a.out(0), b=value)
        a.set_input("b", b.out(0))
        return {"result": (b.out(0),), "expand": g.finalize()}


class Checked:
    """Custom validation: rejects value 7 and reports the linked types it was given."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("FLOAT", {"min": 0.0, "max": 5.0}), "other": ("FLOAT",)}}

    RETURN_TYPES = ("FLOAT",)
    FUNCTION = "run"

    @classmethod
    def VALIDATE_INPUTS(cls, value, other):
        return "sevens are not allowed" if value == 7 else True

    def run(self, value, other):
        return (value,)


class TypeChecked:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("FLOAT",)}}

    RETURN_TYPES = ("FLOAT",)
    FUNCTION = "run"

    @classmethod
    def VALIDATE_INPUTS(cls, input_types):
        return True if input_types.get("value") in ("FLOAT", "INT") else f"got {input_types.get('value')}"

    def run(self, value):
        return (float(value),)


class Picker:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "choice": (["red", "green"],),
                "count": ("INT", {"default": 1, "control_after_generate": True}),
                "ratio": ("FLOAT", {"default": 1.0}),
                "name": ("STRING", {"default": ""}),
                "flag": ("BOOLEAN", {"default": False}),
            }
        }

    RETURN_TYPES = ("STRING",)
    FUNCTION = "run"

    def run(self, choice, count, ratio, name, flag):
        return (f"{choice}{count}",)


class V3Scale(io.ComfyNode):
    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="V3Scale",
            display_name="Scale (V3)",
            category="test",
            inputs=[
                io.Float.Input("value", default=1.0, min=-5.0, max=5.0),
                io.Combo.Input("mode", options=["double", "triple"]),
            ],
            outputs=[io.Float.Output(display_name="scaled")],
            hidden=[io.Hidden.unique_id],
        )

    @classmethod
    def execute(cls, value, mode):
        CALLS.append(f"V3Scale:{cls.hidden.unique_id}")
        return io.NodeOutput(value * (2 if mode == "double" else 3))


class V3AsyncOutput(io.ComfyNode):
    @classmethod
    def define_schema(cls):
        return io.Schema(node_id="V3AsyncOutput", inputs=[io.Float.Input("value")], is_output_node=True)

    @classmethod
    async def execute(cls, value):
        await asyncio.sleep(0.01)
        return io.NodeOutput(ui={"values": [value]})


CLASSES = {
    name: obj
    for name, obj in dict(globals()).items()
    if isinstance(obj, type)
    and (hasattr(obj, "FUNCTION") or hasattr(obj, "define_schema"))
    and obj.__module__ == __name__
}
