"""POST /v1/jobs throughput and latency against a real server (SQLite, synchronous=FULL,
simulated runtime running the jobs meanwhile), measured by `wrk` (a compiled load generator in
a process of its own, Debian package `wrk`) with `bench/submit.lua`. Each run gets a fresh
server, which then answers `/healthz` under the same load: the HTTP ceiling of that run.
`h p99`: that run's p99 (ms). `cpu ms`: the server's CPU time (all threads) per submission,
steadier than the rates when other work shares the machine; it includes the runs beside, so
`ran` says how many of the submitted jobs had run by the end of the submissions (a faster
dispatcher runs more of them, and takes that CPU from the submissions).

    python -m bench.submit [--connections 32] [--duration 10] [--runs 1] [--queue-only] [--batch 8]
        [--database sqlite postgresql]

`--database postgresql`: the store on a throwaway PostgreSQL cluster (Debian's `postgresql`,
`initdb` in TMPDIR, fsync on, a fresh database each run, migrated by the server at start-up);
with both, each run measures SQLite then PostgreSQL, and the last lines give their ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from bench._databases import add_database_option, database_urls, print_ratio
from bench._server import SIM_JOB, running_server
from yolo_orch.testing import list_jobs

LANES = 2
LUA = Path(__file__).with_name("submit.lua")
_SUMMARY = "WRK_SUMMARY "


@dataclass(frozen=True)
class WrkRun:
    requests: int
    duration_us: int
    non_2xx_3xx: int
    socket_errors: int
    p50_us: int
    p99_us: int
    max_us: int

    @property
    def rate(self) -> float:
        return self.requests / (self.duration_us / 1e6)


def wrk(url: str, *, connections: int, duration_s: int, body: str | None) -> WrkRun:
    env = {key: value for key, value in os.environ.items() if key != "WRK_BODY"}
    if body is not None:
        env["WRK_BODY"] = body
    command = ["wrk", "-t", "2", "-c", str(connections), "-d", f"{duration_s}s"]
    command += ["--timeout", "10s", "-s", str(LUA), url]
    output = subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout
    for line in output.splitlines():
        if line.startswith(_SUMMARY):
            return WrkRun(**json.loads(line.removeprefix(_SUMMARY)))
    raise RuntimeError(f"no summary from wrk:\n{output}")


def _hold_lanes(url: str) -> None:
    blocker = {**SIM_JOB, "params": {"sim_seconds": 3600}}
    with httpx.Client(base_url=url, timeout=60) as client:
        for _ in range(LANES):
            client.post("/v1/jobs", json=blocker).raise_for_status()


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process, all its threads (less noisy than rates on a
    shared machine)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--connections", type=int, nargs="+", default=[32])
    parser.add_argument("--duration", type=int, default=10, help="seconds of each wrk run")
    parser.add_argument("--runs", type=int, default=1, help="fresh servers per connection count")
    parser.add_argument(
        "--queue-only",
        action="store_true",
        help="hold both lanes with a long job first, so that the submissions only queue: the "
        "submission path without the dispatcher running jobs beside it",
    )
    parser.add_argument(
        "--batch",
        type=int,
        default=1,
        help="the simulated lanes' batch_max_images (1: every job runs alone, the default for "
        "simulated lanes; real cpu lanes batch 8 by default)",
    )
    add_database_option(parser, "the store's engines, each measured in every run")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed (Debian: apt-get install wrk)")
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"load average before: {load}; {os.cpu_count()} CPUs")
    print(
        f"{'db':>10} {'conns':>5} {'submits/s':>9} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} "
        f"{'refused':>7} {'stored':>7} {'ran':>7} {'cpu ms':>6} {'healthz/s':>9} {'h p99':>6} "
        f"{'ratio':>6}"
    )
    rates: dict[str, list[float]] = {engine: [] for engine in args.database}
    with database_urls(args.database) as database_url:
        for connections in args.connections:
            for _ in range(args.runs):
                for engine in args.database:
                    rate = _run(args, connections, database_url(engine))
                    rates[engine].append(rate)
    print_ratio(rates, "submits/s")


def _run(args: argparse.Namespace, connections: int, database_url: str) -> float:
    """One run on a fresh server (`database_url` "": SQLite in its data dir); its submits/s."""
    # max_queued far above what a run can submit, so nothing is refused.
    with running_server(
        max_queued=10_000_000,
        sim_lanes=LANES,
        batch_max_images={"sim": args.batch},
        database_url=database_url,
    ) as server:
        if args.queue_only:
            _hold_lanes(server.url)
        cpu_before = cpu_seconds(server.pid)
        submits = wrk(
            f"{server.url}/v1/jobs",
            connections=connections,
            duration_s=args.duration,
            body=json.dumps(SIM_JOB),
        )
        cpu_ms = (cpu_seconds(server.pid) - cpu_before) * 1000 / submits.requests
        ran = _jobs_ended(server.url)
        ceiling = wrk(
            f"{server.url}/healthz", connections=connections, duration_s=args.duration, body=None
        )
        with httpx.Client(base_url=server.url, timeout=60) as client:
            stored = len(list_jobs(client)) - (LANES if args.queue_only else 0)
    refused = submits.non_2xx_3xx + submits.socket_errors
    engine = "postgresql" if database_url else "sqlite"
    print(
        f"{engine:>10} {connections:>5} {submits.rate:>9.0f} {submits.p50_us / 1000:>7.1f} "
        f"{submits.p99_us / 1000:>7.1f} {submits.max_us / 1000:>7.1f} {refused:>7} "
        f"{stored:>7} {ran:>7} {cpu_ms:>6.2f} {ceiling.rate:>9.0f} "
        f"{ceiling.p99_us / 1000:>6.1f} {submits.rate / ceiling.rate:>6.2f}",
        flush=True,
    )
    return submits.rate


def _jobs_ended(url: str) -> int:
    """Jobs that have run to an end so far, in any state (from `/metrics`)."""
    text = httpx.get(f"{url}/metrics", timeout=60).text
    return sum(
        int(sample.value)
        for family in text_string_to_metric_families(text)
        if family.name == "yolo_orch_job_duration_seconds"
        for sample in family.samples
        if sample.name.endswith("_count")
    )


if __name__ == "__main__":
    main()
