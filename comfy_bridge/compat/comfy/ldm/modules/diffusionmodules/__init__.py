"""`comfy.ldm.modules.diffusionmodules`: UNet pieces (util, openaimodel, mmdit)."""
