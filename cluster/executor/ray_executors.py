"""Executors as Ray actors (`comfy-cluster serve --ray [ADDRESS]`): Ray places and supervises, we serve.

    head = Head(address="tcp://10.0.0.5:7000", secret=secret).start()
    placer = RayExecutors(head, "auto", device="cuda", env=env)   # one executor per GPU on every node
    ...
    head.stop()                                                   # stops the placer and its actors too

Each actor *is* an executor: its process runs the same `cluster.executor.process.Executor` that `comfy-cluster
executor --head` runs, joined to the head over its tcp:// address with the cluster secret. The control
plane (ZeroMQ) and the data plane (shared memory within a host, TCP across, NVSHMEM on GPUs) stay ours;
Ray carries no tensor. What Ray gives: placement (an actor pinned to its node with `num_gpus=1` per GPU,
`num_cpus` = its torch threads for CPU executors), supervision (`max_restarts=-1`: an executor that dies,
or exits after an aborted invocation, is started again by Ray and registers anew) and membership: the
placer polls the cluster's nodes, starts executors on nodes that join (Ray's autoscaler, KubeRay) and
forgets those of nodes that left; the head re-runs what a lost executor held (lineage, cluster.control.head).

A node's executors read model files from the same workspace path on that node (a shared filesystem, or the
same files on every node): `env` carries the workspace, and an executor refuses a file whose digest differs
from the head's (as every executor joining over TCP does, cluster.refs.verify_digests). `host_per_node` makes each Ray node its own host for the data plane (Ray
nodes started on one machine by tests, which must move tensors between nodes over TCP).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from cluster import secret as cluster_secret
from cluster.control.head import Head
from cluster.dataplane import remote, segments
from cluster.executor.options import executor_argv

log = logging.getLogger("cluster.ray")
POLL_S = 2.0


class ExecutorActor:
    """One executor in a Ray actor's process (made remote with the actor options in `RayExecutors`)."""

    def __init__(self, argv: list[str], host_per_node: bool = False) -> None:
        import ray

        from cluster.executor import process as executor_mod

        if host_per_node:  # before the data plane reads it
            os.environ[remote.HOST_ENV] = f"ray-node-{ray.get_runtime_context().get_node_id()[:16]}"
        args = executor_mod.parse_args(argv)
        # Ray restarts an actor only once its process is dead: what a killed one left in shared memory
        # under this executor's id is nobody's now, and would stand in the new one's way
        segments.unlink_prefix(segments.safe_prefix(args.id))
        self.executor = executor_mod.prepare_executor(args, cluster_secret.read_secret())
        self._thread = threading.Thread(target=self._run, name="executor", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.executor.run()
        except BaseException:
            # the process is in an unknown state: exit, and Ray starts this actor again
            log.exception("executor %s failed", self.executor.id)
            os._exit(1)
        # refused (the head has another secret: starting again would be refused again) or shut down:
        # the actor idles until the placer ends it

    def stopped(self, timeout: float) -> bool:
        """Whether the executor's loop has ended (after the head's Shutdown), waiting up to `timeout`."""
        self._thread.join(timeout)
        return not self._thread.is_alive()


@dataclass
class Placed:
    node_id: str  # "" where Ray chooses the node (autoscaling)
    device: str
    actor: Any
    executor_id: str = ""
    completed: int = 0  # its completions when last seen, and since when it has been idle
    idle_since: float = field(default_factory=time.monotonic)


@dataclass(frozen=True)
class Autoscale:
    """Executors that follow demand between `low` and `high` (`serve --ray-autoscale LOW:HIGH`): one more
    while invocations queue and every executor is busy (and none is still starting), an idle one retired
    after `keepalive_s`, never below `low`. Ray places the executors it adds on nodes with room, or keeps
    them pending, which its autoscaler (KubeRay's) answers with a node; nodes whose executors were retired
    go idle, and the autoscaler removes them."""

    low: int
    high: int
    keepalive_s: float = 300.0

    def decide(
        self, placed: list[Placed], executors: dict[str, dict], queued: int, now: float
    ) -> tuple[int, list[Placed]]:
        """(how many executors to add, which to retire) given the head's view of the executors."""
        for p in placed:  # who worked since the last look
            e = executors.get(p.executor_id)
            if e is not None and (e["running"] or e["queue"] or e["completed"] != p.completed):
                p.completed, p.idle_since = e["completed"], now
        starting = [p for p in placed if p.executor_id not in executors]
        busy = all(
            executors[p.executor_id]["running"] or executors[p.executor_id]["queue"]
            for p in placed
            if p.executor_id in executors
        )
        wanted = len(placed) + (1 if queued and busy and not starting else 0)
        wanted = max(self.low, min(self.high, wanted))
        if wanted > len(placed) or queued:
            return wanted - len(placed), []
        idle = sorted(
            (
                p
                for p in placed
                if p.executor_id in executors
                and now - p.idle_since >= self.keepalive_s
                and not executors[p.executor_id]["running"]
                and not executors[p.executor_id]["queue"]
            ),
            key=lambda p: p.idle_since,
        )
        return 0, idle[: max(0, len(placed) - self.low)]


@dataclass
class RayExecutors:
    """Keeps executors on every alive Ray node: one per GPU with device "cuda" (or "auto" on a node that
    has GPUs), else `per_node` CPU executors with `threads` torch threads each (0: the node's CPUs divided
    among them) on nodes that have CPUs to give."""

    head: Head
    address: str | None = None  # "auto", a Ray address, or None: a local Ray started here
    device: str = "cpu"  # cpu, cuda or auto
    per_node: int = 1
    threads: int = 0
    env: dict[str, str] = field(default_factory=dict)
    host_per_node: bool = False
    memory_budget: int | None = None
    warm_up: bool = True
    autoscale: Autoscale | None = None  # None: executors on every node (per GPU, or per_node CPU ones)
    poll_s: float = POLL_S
    placed: list[Placed] = field(default_factory=list)

    def __post_init__(self) -> None:
        import ray

        self._ray = ray
        if not self.head.address.startswith("tcp://"):
            raise ValueError(f"executors on Ray nodes join the head over TCP; its address is {self.head.address}")
        self._started_ray = not ray.is_initialized()
        self._remote_cls = ray.remote(ExecutorActor)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._first: Future = Future()  # the first placement, or why connecting failed
        self.head.on_stop(self.stop)
        # The placer's thread connects to Ray and lives as long as we do: Ray ties the processes of a local
        # Ray it starts to the *thread* that started them (Linux's parent-death signal), so a short-lived
        # starter thread would take the local cluster down with it.
        self._thread = threading.Thread(target=self._follow, name="ray-placer", daemon=True)
        self._thread.start()
        self._first.result()

    # what each node should run ----------------------------------------------------------------------
    def devices_for(self, resources: dict[str, float]) -> list[str]:
        gpus = int(resources.get("GPU", 0))
        if self.device == "cuda" or (self.device == "auto" and gpus):
            return ["cuda"] * gpus  # Ray gives each actor its GPU as CUDA_VISIBLE_DEVICES: "cuda" is it
        # a node that gives no CPU (a KubeRay head started with num-cpus 0) runs no CPU executor
        return ["cpu"] * self.per_node if resources.get("CPU", 0) >= 1 else []

    def _threads(self, device: str, resources: dict[str, float], n: int) -> int:
        if self.threads:
            return self.threads
        return 1 if device != "cpu" else max(1, int(resources.get("CPU", 1)) // max(1, n))

    def _env(self) -> dict[str, str]:
        env = {**self.env, remote.MODE_ENV: remote.mode()}
        if self.head.secret is not None:
            env[cluster_secret.ENV] = self.head.secret.decode()
        return env

    def _start(self, node_id: str, resources: dict[str, float], device: str, n: int) -> Placed:
        """An executor actor on `node_id` ("": wherever Ray finds room, or pending until a node has it)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        threads = self._threads(device, resources, n)
        executor_id = f"ray-{uuid.uuid4().hex[:10]}"  # kept across Ray's restarts of the actor
        argv = executor_argv(
            self.head.reachable_address,
            device,
            threads=threads,
            heartbeat_s=self.head.heartbeat_s,
            device_share=1,
            host_share=n,
            memory_budget=self.memory_budget,
            warm_up=self.warm_up,
        )
        actor = self._remote_cls.options(
            num_cpus=threads if device == "cpu" else 1,
            num_gpus=0 if device == "cpu" else 1,
            max_restarts=-1,
            max_concurrency=2,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False) if node_id else "DEFAULT",
            runtime_env={"env_vars": self._env()},
        ).remote([*argv, "--id", executor_id], self.host_per_node)
        log.info(
            "executor actor %s on %s (%s, %d thread(s))",
            executor_id,
            f"Ray node {node_id[:12]}" if node_id else "a Ray node with room",
            device,
            threads,
        )
        return Placed(node_id, device, actor, executor_id)

    def place(self) -> None:
        """Fixed: start the executors alive nodes lack, forget (and kill) those of nodes that are gone.
        Autoscaling: add or retire executors as `autoscale` decides."""
        if self.autoscale is not None:
            self._scale()
            return
        nodes = [n for n in self._ray.nodes()]
        alive = {n["NodeID"]: n["Resources"] for n in nodes if n["Alive"]}
        with self._lock:
            if self._stop.is_set():
                return
            for p in [p for p in self.placed if p.node_id not in alive]:
                log.warning("Ray node %s left: its executor is gone (the head re-runs what it held)", p.node_id[:12])
                self._ray.kill(p.actor, no_restart=True)
                self.placed.remove(p)
            for node_id, resources in alive.items():
                wanted = self.devices_for(resources)
                have = [p for p in self.placed if p.node_id == node_id]
                for device in wanted[len(have) :]:
                    self.placed.append(self._start(node_id, resources, device, len(wanted)))

    def _scale(self) -> None:
        stats = self.head.stats()
        executors = {e["id"]: e for e in stats["executors"]}
        with self._lock:
            if self._stop.is_set():
                return
            add, retire = self.autoscale.decide(self.placed, executors, stats["queued"], time.monotonic())
            resources = {"CPU": float(self.threads or 1)}
            device = "cpu" if self.device == "cpu" else "cuda"
            for _ in range(add):
                self.placed.append(self._start("", resources, device, 1))
            for p in retire:
                if self.head.retire(p.executor_id):  # idle still: shut down by the head, then ended here
                    log.info("retiring executor %s (idle for %.0f s)", p.executor_id, time.monotonic() - p.idle_since)
                    self._end(p)
                    self.placed.remove(p)

    def _end(self, p: Placed) -> None:
        try:  # let it finish leaving (data plane closed, segments unlinked) before it is killed
            self._ray.get(p.actor.stopped.remote(5.0), timeout=10)
        except Exception:  # gone with a node, or slow: killed all the same
            pass
        try:
            self._ray.kill(p.actor, no_restart=True)
        except Exception:
            pass

    def _follow(self) -> None:
        try:
            if self._started_ray:
                self._ray.init(
                    address=self.address,
                    include_dashboard=False,
                    log_to_driver=True,
                    **({"object_store_memory": 100 << 20} if self.address is None else {}),
                )
            self.place()
        except BaseException as err:
            self._first.set_exception(err)
            return
        self._first.set_result(None)
        while not self._stop.wait(self.poll_s):
            try:
                self.place()
            except Exception:  # Ray's GCS briefly unreachable: try again next round
                log.exception("following the Ray cluster's nodes failed")

    def expected(self) -> int:
        with self._lock:
            return len(self.placed)

    def stop(self) -> None:
        """After the head's Shutdown: end the actors (no restart), and Ray itself if we started it."""
        self._stop.set()
        with self._lock:
            try:  # let them finish leaving (data plane closed, segments unlinked) before they are killed
                self._ray.get([p.actor.stopped.remote(5.0) for p in self.placed], timeout=10)
            except Exception:  # gone with a node, or slow: killed all the same
                pass
            for p in self.placed:
                try:
                    self._ray.kill(p.actor, no_restart=True)
                except Exception:  # already gone with its node
                    pass
            self.placed.clear()
        if self._started_ray:
            self._ray.shutdown()


def start_ray_cluster(
    ray_address: str | None,
    *,
    device: str = "cpu",
    per_node: int = 1,
    threads: int = 0,
    env: dict[str, str] | None = None,
    host_per_node: bool = False,
    tenant: str = "default",
    wait_s: float = 180.0,
    warm_up: bool = True,
    autoscale: Autoscale | None = None,
    **head_kw: Any,
) -> tuple[Head, Any]:
    """A head on its tcp:// `address` (in `head_kw`, with its secret and options) and executors placed on
    the Ray cluster at `ray_address` ("auto", an address, or None: a local Ray started here); returns once
    the executors placed at start have registered (none yet, on a cluster without the devices asked for:
    they join as nodes do)."""
    from cluster.cluster_runtime import ClusterRuntime

    head = Head(**head_kw).start()
    try:
        placer = RayExecutors(
            head,
            ray_address,
            device,
            per_node,
            threads,
            dict(env or {}),
            host_per_node,
            warm_up=warm_up,
            autoscale=autoscale,
        )
        head.ray_executors = placer
        head.wait_for_executors(placer.expected(), timeout=wait_s)
    except Exception:
        head.stop()
        raise
    return head, ClusterRuntime(head, tenant)
