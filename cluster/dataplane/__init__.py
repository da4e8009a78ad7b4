"""The data plane: per-executor arenas, one-sided tensor pulls, memory budget (see ARCHITECTURE.md)."""
