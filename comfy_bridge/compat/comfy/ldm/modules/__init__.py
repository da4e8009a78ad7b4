"""`comfy.ldm.modules`: attention, diffusion-model building blocks and distributions."""
