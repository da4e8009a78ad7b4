"""Sampling math with ComfyUI's numbers: model sampling (sigma <-> timestep), schedules, samplers, noise."""
