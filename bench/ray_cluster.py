"""The Ray executor against the thread executor, in the same run, on the simulated runtime:
a `ray.cluster_utils.Cluster` of 2 nodes x 2 logical GPUs against 4 simulated lanes.

    python -m bench.ray_cluster [--seconds 0.2] [--work 12] [--jobs 30] [--training 0.2]

Ray listens on every interface, so this re-runs itself inside a network namespace that has
nothing but loopback (`unshare -n`, as root) and refuses to start Ray anywhere else.

- utilisation: the jobs' own work (`--seconds` x gpus) / (lanes x wall), as in `bench.admission`,
  for a saturating stream of `--seconds` jobs (80 % 1-lane inference, 20 % 2-lane training by
  default: `--training`), queued while gate jobs hold every lane; the wall time runs from asking
  the gates to stop to the last job's end (a gate stops at its runner's next safe point, every
  10 ms, so how fast an executor frees a cancelled job's lanes counts, not the simulated step);
- per-job overhead: `--jobs` jobs of 10 ms one after another, each submitted with
  `Prefer: wait`: the client's latency, and the run's (started_at..finished_at) cost beyond its
  10 ms;
- node join: every lane held, one job queued, then a 1-GPU node joins: the time from
  `add_node` returning to that job starting, and ending;
- per-job cost of the three ways a job runs, below the server, in this process: a thread
  (`ThreadExecutor`), a fresh Ray task pinned to the node (how the Ray executor ran every job
  before lane actors), and the lane's warm actor (`RayExecutor`, how it runs inference now):
  the median wall time of `--jobs` 10 ms jobs beyond their 10 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from bench._server import running_server
from bench.admission import fill, job_body
from yolo_orch.testing import list_jobs, wait_all_terminal

TINY_S = 0.01


def loopback_only() -> bool:
    return {name for _, name in socket.if_nameindex()} == {"lo"}


def gate(gpus: int) -> dict[str, Any]:
    return {
        "kind": "training",
        "model": "sim",
        "dataset": "gate",
        "gpus": gpus,
        # A safe point every 10 ms, as a runner between images.
        "params": {"sim_seconds": 100, "sim_steps": 10_000},
    }


def wait_state(client: httpx.Client, job_id: str, states: set[str], timeout_s: float) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        job = client.get(f"/v1/jobs/{job_id}").json()
        if job["state"] in states:
            return job
        time.sleep(0.005)
    raise TimeoutError(f"job {job_id} not {states} within {timeout_s}s")


def hold_every_lane(client: httpx.Client, gates: list[int]) -> list[str]:
    ids = [client.post("/v1/jobs", json=gate(gpus)).json()["id"] for gpus in gates]
    for job_id in ids:
        wait_state(client, job_id, {"running"}, 60)
    return ids


def utilisation(
    url: str, gates: list[int], seconds: float, work_s: float, training: float
) -> dict[str, float]:
    rng = random.Random(42)
    lanes = sum(gates)
    count = max(20, int(work_s * lanes / (seconds * 1.2)))
    bodies = [job_body(i, seconds, training, rng) for i in range(count)]
    with httpx.Client(base_url=url, timeout=60) as client:
        held = hold_every_lane(client, gates)
        asyncio.run(fill(url, bodies))
        begin = time.time()  # the server's clock: the same host
        for job_id in held:
            client.post(f"/v1/jobs/{job_id}/cancel")
        gates_done = [wait_state(client, job_id, {"cancelled"}, 30) for job_id in held]
        wait_all_terminal(client, timeout=count * seconds + 120)
        first = min(_ts(job["created_at"]) for job in gates_done)
        recent = [
            job
            for job in list_jobs(client)
            if job["id"] not in held and _ts(job["created_at"]) >= first
        ]
    states = {job["state"] for job in recent}
    if states != {"succeeded"}:
        raise RuntimeError(f"unexpected job states: {states}")
    end = max(_ts(job["finished_at"]) for job in recent)
    # The jobs' own work, as in bench.admission: started_at..finished_at also counts writing
    # results after the lane was given back. The wall time starts when the gates are asked to
    # stop, so how fast an executor frees a cancelled job's lanes counts too.
    own = sum(seconds * int(job["gpus"]) for job in recent)
    wall = end - begin
    return {"jobs": len(recent), "wall": wall, "utilisation": own / (lanes * wall)}


def overhead(url: str, count: int) -> dict[str, float]:
    body = {
        "kind": "inference",
        "model": "sim",
        "inputs": ["x.jpg"],
        "params": {"sim_seconds": TINY_S, "sim_steps": 1},
    }
    latencies, run_costs = [], []
    with httpx.Client(base_url=url, timeout=60) as client:
        for _ in range(count):
            started = time.perf_counter()
            job = client.post("/v1/jobs", json=body, headers={"Prefer": "wait=30"}).json()
            if job["state"] != "succeeded":
                job = wait_state(client, job["id"], {"succeeded"}, 30)
            latencies.append(time.perf_counter() - started)
            run_costs.append(_ts(job["finished_at"]) - _ts(job["started_at"]) - TINY_S)
    return {
        "latency_ms": 1000 * statistics.median(latencies),
        "run_overhead_ms": 1000 * statistics.median(run_costs),
    }


def node_join(url: str, cluster: Any) -> dict[str, float]:
    with httpx.Client(base_url=url, timeout=60) as client:
        held = hold_every_lane(client, [2, 2])
        waiting = client.post("/v1/jobs", json=job_body(0, TINY_S, 0.0, random.Random(1)))
        job_id = waiting.json()["id"]
        cluster.add_node(num_cpus=1, num_gpus=1)
        joined = time.time()
        running = wait_state(client, job_id, {"running", "succeeded"}, 60)
        seen = time.time()
        done = wait_state(client, job_id, {"succeeded"}, 60)
        for gate_id in held:
            client.post(f"/v1/jobs/{gate_id}/cancel")
    return {
        "to_start_s": (_ts(running["started_at"]) if running["started_at"] else seen) - joined,
        "to_end_s": _ts(done["finished_at"]) - joined,
    }


def paths(cluster: Any, count: int, folder: Path) -> dict[str, float]:
    """Milliseconds per job beyond its work, for a thread, a pinned task and a warm lane
    actor, each running the same tiny simulated inference `count` times."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from yolo_orch.dispatch.executor import ThreadExecutor
    from yolo_orch.dispatch.lanes import Lanes
    from yolo_orch.ray_cluster.executor import RayExecutor
    from yolo_orch.ray_cluster.node_side import serve_task
    from yolo_orch.ray_cluster.nodes import ClusterWatcher
    from yolo_orch.runners.simulated import SimulatedRuntime

    @ray.remote(num_cpus=0, max_retries=0, num_returns="streaming")
    def as_task(task: Any) -> Any:
        yield from serve_task(task, ray.get_runtime_context().get_node_id())

    ray.init(address=cluster.address, namespace="bench-paths", log_to_driver=False)
    try:
        watcher = ClusterWatcher(
            Lanes([], 1, dynamic=True), ray.nodes, lambda: None, cpu_lanes=False, interval_s=1.0
        )
        asyncio.run(watcher.refresh())
        node = next(node for node in watcher.nodes.values() if node.gpus)
        lane = node.lanes(cpu_lanes=False)[0]

        async def build_task(ctx: Any) -> Any:
            return _node_task(ctx, folder)

        actor_executor = RayExecutor(watcher, build_task, slots_per_lane=1, cancel_grace_s=1.0)
        threads = ThreadExecutor(SimulatedRuntime(1), 1)
        pinned = as_task.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=False)
        )

        async def thread_run(index: int) -> None:
            await threads.run(_context(index, "sim:0", folder))

        async def task_run(index: int) -> None:
            ctx = _context(index, lane, folder)
            stream: Any = pinned.remote(_node_task(ctx, folder))  # a streaming generator
            async for ref in stream:
                await ref

        async def actor_run(index: int) -> None:
            await actor_executor.run(_context(index, lane, folder))

        async def measure(run_one: Callable[[int], Awaitable[None]]) -> float:
            await run_one(-1)  # warm: the worker, the actor
            costs = []
            for index in range(count):
                started = time.perf_counter()
                await run_one(index)
                costs.append(time.perf_counter() - started - TINY_S)
                # off the lane's path (its next job starts meanwhile), so not timed
                await actor_executor.release(f"bench-{index}")
            return 1000 * statistics.median(costs)

        async def all_paths() -> dict[str, float]:
            costs = {
                "thread_ms": await measure(thread_run),
                "task_ms": await measure(task_run),
                "lane_actor_ms": await measure(actor_run),
            }
            await actor_executor.close()
            return costs

        return asyncio.run(all_paths())
    finally:
        ray.shutdown()


def _context(index: int, lane: str, folder: Path) -> Any:
    from yolo_orch.domain import Job, JobKind, JobState
    from yolo_orch.domain.specs import InferenceSpec
    from yolo_orch.runners.base import RunContext

    job = Job(
        id=f"bench-{index}",
        seq=1,
        kind=JobKind.INFERENCE,
        state=JobState.RUNNING,
        model="sim",
        model_id=None,
        spec=InferenceSpec(inputs=["x.jpg"], params={"sim_seconds": TINY_S, "sim_steps": 1}),
        priority=0,
        gpus=1,
        devices=(lane,),
        attempt=1,
        max_attempts=1,
        created_at=datetime.now(UTC),
    )
    return RunContext(
        job=job,
        devices=(lane,),
        workdir=folder / job.id,
        report_progress=lambda progress: None,
        should_cancel=lambda: False,
    )


def _node_task(ctx: Any, folder: Path) -> Any:
    from yolo_orch.ray_cluster.node_runtime import NodeRuntimeSpec
    from yolo_orch.ray_cluster.node_side import NodeTask

    simulated = NodeRuntimeSpec(
        name="simulated",
        model_cache_size=1,
        cpu_threads=None,
        max_image_pixels=1 << 24,
        shared_data_roots=(),
    )
    return NodeTask(
        job=ctx.job,
        lanes=ctx.devices,
        runtime=simulated,
        seed={},
        inputs=None,
        weights=None,
        variant=None,
        cache_dir=str(folder / "cache"),
        cache_models=1,
    )


def _ts(stamp: Any) -> float:
    return datetime.fromisoformat(str(stamp)).timestamp()


def warm(url: str, jobs: int) -> None:
    """Start the workers a run uses (Ray starts a worker process per concurrent task)."""
    bodies = [job_body(i, TINY_S, 0.0, random.Random(i)) for i in range(jobs)]
    asyncio.run(fill(url, bodies))
    with httpx.Client(base_url=url, timeout=60) as client:
        wait_all_terminal(client, timeout=120)


def run(args: argparse.Namespace) -> None:
    from ray.cluster_utils import Cluster

    cluster: Any = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 0})
    for _ in range(2):
        cluster.add_node(num_cpus=1, num_gpus=2)
    cluster.wait_for_nodes()
    rows: dict[str, dict[str, float]] = {}
    try:
        executors: dict[str, tuple[dict[str, Any], list[int]]] = {
            "threads": ({"sim_lanes": 4}, [4]),
            "ray": ({"executor": "ray", "ray_address": cluster.address}, [2, 2]),
        }
        for name, (settings, gates) in executors.items():
            with running_server(max_queued=10_000, ray_poll_interval_s=0.2, **settings) as server:
                warm(server.url, 8)
                row = {"startup_s": server.startup_s}
                row |= utilisation(server.url, gates, args.seconds, args.work, args.training)
                row |= overhead(server.url, args.jobs)
                if name == "ray":
                    row |= node_join(server.url, cluster)
                rows[name] = row
        with tempfile.TemporaryDirectory() as folder:
            costs = paths(cluster, args.jobs, Path(folder))
    finally:
        cluster.shutdown()
    print(
        f"load average: {os.getloadavg()[0]:.2f}; {args.seconds}s jobs for utilisation, "
        f"{args.training:.0%} of them 2-lane training"
    )
    print(f"{'executor':>8} {'jobs':>5} {'utilisation':>11} {'latency ms':>10} {'run cost ms':>11}")
    for name, row in rows.items():
        print(
            f"{name:>8} {row['jobs']:>5.0f} {row['utilisation']:>11.3f} "
            f"{row['latency_ms']:>10.1f} {row['run_overhead_ms']:>11.1f}"
        )
    ratio = rows["ray"]["latency_ms"] / rows["threads"]["latency_ms"]
    print(f"ray / threads latency of a {TINY_S * 1000:.0f} ms job: {ratio:.2f}x")
    share = rows["ray"]["utilisation"] / rows["threads"]["utilisation"]
    print(f"ray / threads utilisation: {share:.2f}")
    ray_row = rows["ray"]
    print(
        f"node join -> its first job started: {ray_row['to_start_s']:.2f}s, "
        f"ended: {ray_row['to_end_s']:.2f}s"
    )
    print(
        f"per-job cost below the server (median of {args.jobs} {TINY_S * 1000:.0f} ms jobs): "
        f"thread {costs['thread_ms']:.1f} ms, pinned ray task {costs['task_ms']:.1f} ms, "
        f"warm lane actor {costs['lane_actor_ms']:.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=0.2)
    parser.add_argument(
        "--work",
        type=float,
        default=12.0,
        help="seconds of work per lane (bench.admission's default: with less, the last job's "
        "end on one lane weighs more)",
    )
    parser.add_argument("--jobs", type=int, default=30, help="jobs for the overhead")
    parser.add_argument("--training", type=float, default=0.2, help="share of 2-lane training jobs")
    args = parser.parse_args()
    if loopback_only():
        run(args)
        return
    if shutil.which("unshare") is None:
        sys.exit("needs `unshare -n` (root): Ray must not listen on a real interface")
    inside = 'ip link set lo up && exec "$@"'
    command = [sys.executable, "-m", "bench.ray_cluster", *sys.argv[1:]]
    sys.exit(subprocess.call(["unshare", "-n", "sh", "-c", inside, "sh", *command]))


if __name__ == "__main__":
    main()
