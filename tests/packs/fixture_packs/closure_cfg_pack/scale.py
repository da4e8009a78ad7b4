class Scaler:
    """State the closure keeps, as sd-dynamic-thresholding's DynThresh (it sets `step` on each call)."""

    def __init__(self, factor):
        self.factor = factor
        self.step = None

    def guide(self, cond, uncond, cond_scale):
        return uncond + (cond - uncond) * (cond_scale * self.factor)
