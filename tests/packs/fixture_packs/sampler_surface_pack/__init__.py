"""A pack in the style of the sampler packs: it imports the sampling surface as they do (k-diffusion
functions and helpers, comfy.samplers' sampler objects and helpers, comfy.sampler_helpers, the NOISE classes
of nodes_custom_sampler) and offers a node that gives NOISE and SAMPLER values built from them."""

import comfy.sample  # noqa: F401
import comfy.sampler_helpers  # noqa: F401
import comfy.samplers
from comfy.k_diffusion import sampling as k_diffusion_sampling  # noqa: F401
from comfy.k_diffusion.sampling import (  # noqa: F401
    BrownianTreeNoiseSampler,
    default_noise_sampler,
    get_ancestral_step,
    get_sigmas_karras,
    sample_dpmpp_2m_sde,
    sample_euler,
    to_d,
)
from comfy.sampler_helpers import cleanup_additional_models, convert_cond, prepare_sampling  # noqa: F401
from comfy.samplers import KSAMPLER, CFGGuider, KSamplerX0Inpaint, calc_cond_batch, sampling_function  # noqa: F401
from comfy_extras.nodes_custom_sampler import Noise_EmptyNoise, Noise_RandomNoise


class PackNoiseAndSampler:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "seed": ("INT", {"default": 0}),
                "add_noise": ("BOOLEAN", {"default": True}),
                "sampler_name": (comfy.samplers.KSAMPLER_NAMES,),
            }
        }

    RETURN_TYPES = ("NOISE", "SAMPLER")
    FUNCTION = "make"
    CATEGORY = "sampler_surface_pack"

    def make(self, seed, add_noise, sampler_name):
        noise = Noise_RandomNoise(seed) if add_noise else Noise_EmptyNoise()
        return (noise, comfy.samplers.sampler_object(sampler_name))


NODE_CLASS_MAPPINGS = {"PackNoiseAndSampler": PackNoiseAndSampler}
