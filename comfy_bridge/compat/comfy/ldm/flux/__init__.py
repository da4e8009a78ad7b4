"""`comfy.ldm.flux`: Flux layers, rope math and the model class name."""
