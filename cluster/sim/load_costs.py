"""What loading and running take on the simulated GPUs: the dispatcher's load costs
(cluster.scheduling.interface.LoadCosts) for the simulator, and the time one run of a ModelFn computes.
Ours loads layer by layer and starts once enough first layers are resident (prefix loading, Eq. 1);
the monolithic baselines load a workflow's missing models, and start a function instance first when
none of the workflow is alive."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from cluster.scheduling.tenant_scheduler import Invocation
from cluster.scheduling.warm_wait import load_estimate
from cluster.sim.gpu_profiles import ModelProfile
from cluster.weights.prefix import e2e_time

if TYPE_CHECKING:
    from cluster.sim.simulator import SimConfig, SimExecutor

WHOLE_WORKFLOW = -1  # a step's node index when the whole workflow runs as one function (the baselines)


class SimLoadCosts:
    def __init__(
        self,
        cfg: SimConfig,
        profiles: dict[str, ModelProfile],
        compute: dict[str, float],
        load: dict[str, float],
        functions: bool,
    ) -> None:
        self.cfg, self.profiles, self.compute, self.load, self.functions = cfg, profiles, compute, load, functions

    def load_s(self, ex: SimExecutor, inv: Invocation) -> float:
        return self.load_estimate(ex, inv)

    def exposed_load_s(self, ex: SimExecutor, inv: Invocation) -> float:
        return self.exposed_load(ex, inv)

    def prepare(self, inv: Invocation, free: Sequence[Any]) -> None:
        if self.functions:  # placement prefers a live instance of the workflow (no start-up)
            for e in free:
                e.cached_models &= e.instances.keys()
        if self.cfg.system == "mcache":  # then the GPU holding most of the workflow's models
            models = inv.payload.request.wf.models
            inv.input_bytes = {e.id: e.cache.cached_bytes(models) for e in free}

    def load_estimate(self, ex: SimExecutor, inv: Invocation) -> float:
        req, i = inv.payload
        if i != WHOLE_WORKFLOW:
            p = self.profiles[inv.model_key]
            return load_estimate(p.layers, ex.cache.layers(p.name), self.load[p.name])
        startup = 0.0 if self.instance_alive(ex, req.wf.name) else self.cfg.startup_s
        if self.cfg.system == "mcache":
            return startup + sum(self.load[m] for m in req.wf.models if m not in ex.cache.resident)
        return startup + sum(self.load[m] for m in req.wf.models)

    def instance_alive(self, ex: SimExecutor, workflow: str) -> bool:
        """A live function instance of `workflow` on `ex` (always, when instances cost nothing)."""
        return not self.functions or workflow in ex.instances

    def exposed_load(self, ex: SimExecutor, inv: Invocation) -> float:
        """Loading `inv` will add to its run on `ex`: with prefix loading, what the resident first
        layers do not hide (Eq. 1); monolithic functions load their missing models before running."""
        req, i = inv.payload
        if i == WHOLE_WORKFLOW:
            if self.cfg.system == "wcache" and req.wf.name in ex.cache.resident:
                return 0.0
            return self.load_estimate(ex, inv)
        p = self.profiles[inv.model_key]
        before = ex.cache.layers(p.name)
        if before == p.layers:
            return 0.0
        if not self.cfg.prefix_loading:
            return load_estimate(p.layers, before, self.load[p.name])
        return (
            e2e_time(p.layers, before, self.load[p.name] / p.layers, self.compute[p.name] / p.layers)
            - self.compute[p.name]
        )

    def run_s(self, model: str, n: int) -> float:
        """Seconds one run of `n` invocations of `model` computes: its profiled batch time, padded, or
        1 + (n-1) x `batch_marginal` times one invocation."""
        profiled = self.profiles[model].padded_batch_s(n)
        if profiled is not None:
            return profiled / self.cfg.gpu.speed
        return self.compute[model] * (1 + (n - 1) * self.cfg.batch_marginal)
