"""Scheduling: which invocation runs next and where. The tenant scheduler (vTime and its baselines,
chosen from the policy registry), the dispatch policy that drives it (placement, warm wait, batching),
the cost model and per-model scaling. No sockets, no threads: the head and the simulator drive it."""
