"""Custom node packs on the cluster: where a pack's classes came from, how their values cross to an
executor, the MODEL / CLIP / VAE proxies packs call, and the `pack_node` ModelFn that runs a pack's
node whole on an executor."""
