"""`comfy.ldm.models`: the autoencoder class name."""
