"""Model loading: architecture detection, configs inferred from tensor shapes, key conversion, LoRA."""
