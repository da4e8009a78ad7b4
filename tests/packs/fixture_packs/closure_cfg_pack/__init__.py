"""Sets a closure as the model's CFG function, as sd-dynamic-thresholding does: it closes over the MODEL it
was given (and reads its model_sampling), an object of the pack's own class and a float input."""

from .scale import Scaler


class ClosureCFG:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL",), "factor": ("FLOAT", {"default": 0.5})}}

    RETURN_TYPES = ("MODEL",)
    FUNCTION = "patch"
    CATEGORY = "closure_cfg_pack"

    def patch(self, model, factor):
        scaler = Scaler(factor)

        def guided(args):
            scaler.step = 999 - model.model.model_sampling.timestep(args["sigma"])[0].item()
            return scaler.guide(args["cond"], args["uncond"], args["cond_scale"])

        m = model.clone()
        m.set_model_sampler_cfg_function(guided)
        return (m,)


NODE_CLASS_MAPPINGS = {"ClosureCFG": ClosureCFG}
