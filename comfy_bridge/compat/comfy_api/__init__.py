"""`comfy_api`: the versioned node API (latest, v0_0_2, v0_0_1)."""
