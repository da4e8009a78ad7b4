"""Executors: the process (`python -m cluster.executor`), the core that runs one dispatch with or
without a process around it, the models it keeps, its preloading, where ModelFns come from, and the
launchers that start executors on this machine or as Ray actors. Nothing is imported here: `serve`
imports the launcher before torch (cluster.executor.options)."""
