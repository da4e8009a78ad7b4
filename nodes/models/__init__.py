"""Model loading: architecture detection, configs inferred from tensor shapes, key conversion, LoRA."""

from .lean_imports import defer

# Before any model module imports diffusers: its packages and torch._dynamo stay unimported until needed
# (seconds of a cold start; see lean_imports).
defer()
