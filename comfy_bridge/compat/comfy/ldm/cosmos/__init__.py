"""`comfy.ldm.cosmos`: Cosmos model classes (predict2)."""
