"""`comfy.ldm.wan`: Wan helpers (sinusoidal_embedding_1d)."""
