"""The weight cache: layer-granular, three tiers (device, host, disk), prefix loading (see ARCHITECTURE.md)."""
