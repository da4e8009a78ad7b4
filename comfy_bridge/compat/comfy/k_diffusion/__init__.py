"""`comfy.k_diffusion`: the sampler functions and helpers packs call (see .sampling)."""
