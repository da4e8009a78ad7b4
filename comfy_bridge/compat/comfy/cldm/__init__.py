"""`comfy.cldm`: the ControlNet model class name."""
