"""A V3 pack in one file: comfy_entrypoint returning a ComfyExtension."""

from comfy_api.latest import ComfyExtension, io


class V3Scale(io.ComfyNode):
    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="V3Scale",
            display_name="Scale (v3 pack)",
            category="v3_pack",
            inputs=[io.Image.Input("image"), io.Float.Input("factor", default=2.0)],
            outputs=[io.Image.Output()],
        )

    @classmethod
    def execute(cls, image, factor):
        return io.NodeOutput(image * factor)


class V3Extension(ComfyExtension):
    async def get_node_list(self):
        return [V3Scale]


async def comfy_entrypoint():
    return V3Extension()
