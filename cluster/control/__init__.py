"""The control plane: the head, composed of parts with one concern each (transport, membership and
liveness, lineage and re-runs, preloads, results)."""
