"""Two NVSHMEM PEs, each its own process, pull each other's tensors through their arenas (the last step
of scripts/gpu_check.sh, in processes of its own: NVSHMEM ends a process whose init fails).

PE 0 makes the team's unique id and hands its bytes to PE 1 (as the head will over the control plane);
both join, allocate their arenas collectively, publish a seeded tensor, pull the other's, compare it
with the same seed's tensor made locally, and time a larger pull. One GPU: both PEs on it; two or more: one
each. Exit status 0 only when both PEs saw the right bytes, within `--deadline` seconds (a PE that has not
reported by then is killed and named: the check's step limit must not be what ends a hung join).

Two PEs on one GPU run in NVSHMEM's limited multiple-processes-per-GPU mode (without MPS, as there). The
exchange uses only what a PE needs in any mode: init by unique id, the symmetric allocation and its free,
one-sided get and quiet on a stream, barrier_all (on a stream) and finalize; no team is split and no team
collective (reduction, broadcast, alltoall) is called. tests/test_gpu_check_script.py checks that list.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import time
import traceback
import uuid
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SHAPE = (512, 512)
BIG = 32 << 20  # bytes of the timed pull
TIMEOUT_S = 35  # default deadline of the whole exchange


def seeded(rank: int, shape: tuple[int, ...], device: str):
    import torch

    return torch.randn(shape, generator=torch.Generator(device).manual_seed(1000 + rank), device=device)


def exchange(
    rank: int, n: int, device: str, uid_q, inboxes, big: int = BIG, stream=None, timeout_s: float = TIMEOUT_S
) -> tuple[bool, str]:
    """One PE's part: join the team (PE 0 makes its id), publish, pull the next PE's tensors, compare, leave.
    `device`: "cuda:N" (or "cpu" against tests/dataplane/fake_nvshmem.py); `stream`: the arena's."""
    import nvshmem.core as nvshmem
    import torch

    from cluster.dataplane.arena import NvshmemArena
    from cluster.dataplane.handle import TensorHandle
    from cluster.dataplane.nvshmem_team import join, leave, new_unique_id
    from cluster.dataplane.tensor_store import TensorStore

    index = torch.device(device).index or 0
    if device.startswith("cuda"):
        torch.cuda.set_device(index)
    if rank == 0:
        uid = new_unique_id()
        for _ in range(n - 1):
            uid_q.put(uid)
    else:
        uid = uid_q.get(timeout=timeout_s)
    join(uid, rank, n, index)
    arena = NvshmemArena(4 * big, stream=stream)  # collective: same size, same order on every PE
    owner = f"p{rank}{uuid.uuid4().hex[:6]}"
    store = TensorStore(arena, owner, f"cc-{owner}-")
    small = store.publish(seeded(rank, SHAPE, device))
    large = store.publish(torch.full((big // 4,), float(rank), device=device))
    other = (rank + 1) % n
    for peer in range(n):
        if peer != rank:
            inboxes[peer].put((rank, msgspec.structs.asdict(small), msgspec.structs.asdict(large)))
    got = {}
    while other not in got:
        sender, got_small, got_large = inboxes[rank].get(timeout=timeout_s)
        got[sender] = (got_small, got_large)
    got_small, got_large = got[other]
    with store.scope() as scope:
        pulled = scope.fetch(TensorHandle(**{**got_small, "shape": tuple(got_small["shape"])}))
        ok = bool(torch.equal(pulled, seeded(other, SHAPE, device)))
        t0 = time.perf_counter()
        pulled_large = scope.fetch(TensorHandle(**{**got_large, "shape": tuple(got_large["shape"])}))
        seconds = time.perf_counter() - t0
        ok = ok and bool(torch.all(pulled_large == float(other)))
    nvshmem.barrier_all(arena.rma_stream)  # every pull done before any arena is freed
    arena.stream.synchronize()
    store.close()
    arena.close()
    leave()
    return ok, (
        f"PE {rank} on {device}: pulled PE {other}'s tensors, {'equal' if ok else 'DIFFERENT'}; "
        f"{big / 2**20:.0f} MiB in {seconds * 1e3:.2f} ms ({big / seconds / 1e9:.1f} GB/s)"
    )


def member(rank: int, devices: list[int], uid_q, inboxes, results, timeout_s: float) -> None:
    try:
        ok, text = exchange(rank, len(devices), f"cuda:{devices[rank]}", uid_q, inboxes, timeout_s=timeout_s)
        results.put((rank, ok, text))
    except BaseException:
        results.put((rank, False, f"PE {rank} failed:\n{traceback.format_exc()}"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--deadline", type=float, default=TIMEOUT_S, help="seconds for the whole exchange")
    deadline_s = parser.parse_args(argv).deadline
    import torch

    count = torch.cuda.device_count()
    if count == 0:
        print("no CUDA device")
        return 1
    devices = [0, 0] if count == 1 else [0, 1]
    ctx = mp.get_context("spawn")
    uid_q, results = ctx.Queue(), ctx.Queue()
    inboxes = [ctx.Queue() for _ in devices]
    procs = [
        ctx.Process(target=member, args=(r, devices, uid_q, inboxes, results, deadline_s)) for r in range(len(devices))
    ]
    for p in procs:
        p.start()
    reports = []
    deadline = time.monotonic() + deadline_s
    while len(reports) < len(procs) and time.monotonic() < deadline:
        try:
            reports.append(results.get(timeout=1))
        except Exception:
            if all(p.exitcode is not None for p in procs) and results.empty():
                break
    for rank, p in enumerate(procs):
        p.join(max(0.0, min(5.0, deadline - time.monotonic())))
        if p.exitcode is None:
            print(f"PE {rank} had not finished after {deadline_s:g} s: killed")
            p.kill()
            p.join(5)
    for _rank, _, text in sorted(reports):
        print(text)
    dead = [
        f"PE {r} exited with {p.exitcode} before reporting"
        for r, p in enumerate(procs)
        if r not in {rank for rank, _, _ in reports}
    ]
    for line in dead:
        print(line)
    return 0 if len(reports) == len(procs) and all(ok for _, ok, _ in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
