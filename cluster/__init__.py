"""The serverless back end: ModelFn seam, runtimes, scheduler, executors, data plane."""
