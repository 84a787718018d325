"""Connection floods: a real server (simulated runtime, SQLite) whose open-files limit is
lowered with `prlimit`, held by N idle connections, N held waits (`Prefer: wait`) and N/8
stalled bodies at once (N = 2x the limit), while jobs run. Prints what the flood did to the
server: `/healthz` latency and failures during it, jobs failed, descriptor errors and fsync
errors in its log, its resident memory before, at the end of and a minute after the flood.

    python -m bench.floods [--fd-limit 1024] [--flood-s 20] [--settle-s 60]

Targets (issue 34): 0 jobs failed, 0 fsync or descriptor errors, `/healthz` p99 < 100 ms during
the flood, memory back within 50 MB of the start a minute after. It asserts nothing; the
server it floods is the `yolo_orch` on this interpreter's path (PYTHONPATH=OTHER/src floods
another checkout's).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import resource
import time
from collections import Counter
from dataclasses import dataclass, field

import httpx

from bench._server import percentile, running_server
from yolo_orch.testing import TERMINAL_STATES, read_rss_kib

LONG_JOB = {"kind": "inference", "model": "sim", "inputs": ["long.jpg"], "params": {}}
SHORT_JOB = {"kind": "inference", "model": "sim", "inputs": ["short.jpg"], "params": {}}


@dataclass
class FloodReport:
    fd_limit: int
    connections: int
    health_ms: list[float] = field(default_factory=list)
    health_failures: Counter[str] = field(default_factory=Counter)
    wait_answers: Counter[str] = field(default_factory=Counter)
    jobs: Counter[str] = field(default_factory=Counter)
    fd_errors: int = 0
    fsync_errors: int = 0
    rss_before_kib: int = 0
    rss_flood_kib: int = 0
    rss_after_kib: int = 0


async def _hold_idle(host: str, port: int, stop: asyncio.Event) -> None:
    with contextlib.suppress(OSError):
        _, writer = await asyncio.open_connection(host, port)
        await stop.wait()
        writer.close()


async def _hold_wait(
    host: str, port: int, job_id: str, stop: asyncio.Event, answers: Counter[str]
) -> None:
    request = (
        f"GET /v1/jobs/{job_id} HTTP/1.1\r\nHost: {host}\r\nPrefer: wait=600\r\n\r\n"
    ).encode()
    try:
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(request)
        status = await _read_status(reader, stop)
        answers[status] += 1
        writer.close()
    except OSError as exc:
        answers[type(exc).__name__] += 1


async def _hold_stalled_body(host: str, port: int, stop: asyncio.Event) -> None:
    head = (
        f"POST /v1/jobs HTTP/1.1\r\nHost: {host}\r\ncontent-type: application/json\r\n"
        "content-length: 5000\r\n\r\n{"
    ).encode()
    with contextlib.suppress(OSError):
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(head)
        await _read_status(reader, stop)
        writer.close()


async def _read_status(reader: asyncio.StreamReader, stop: asyncio.Event) -> str:
    """The status of the answer, or "held" when the flood ended first ("closed": no answer)."""
    read = asyncio.ensure_future(reader.readline())
    stopped = asyncio.ensure_future(stop.wait())
    await asyncio.wait({read, stopped}, return_when=asyncio.FIRST_COMPLETED)
    stopped.cancel()
    if not read.done():
        read.cancel()
        return "held"
    line = read.result()
    return line.split()[1].decode() if line.startswith(b"HTTP/") else "closed"


async def _probe_health(url: str, stop: asyncio.Event, report: FloodReport) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=5) as client:
        while not stop.is_set():
            started = time.perf_counter()
            try:
                # A new connection each time: a client arriving during the flood.
                response = await client.get("/healthz", headers={"Connection": "close"})
                if response.status_code == 200:
                    report.health_ms.append((time.perf_counter() - started) * 1000)
                else:
                    report.health_failures[str(response.status_code)] += 1
            except httpx.HTTPError as exc:
                report.health_failures[type(exc).__name__] += 1
            await asyncio.sleep(0.05)


async def _submit_short_jobs(client: httpx.AsyncClient, stop: asyncio.Event) -> list[str]:
    ids = []
    while not stop.is_set():
        with contextlib.suppress(httpx.HTTPError):
            response = await client.post("/v1/jobs", json=SHORT_JOB)
            if response.status_code == 202:
                ids.append(response.json()["id"])
        await asyncio.sleep(0.2)
    return ids


async def _flood(url: str, pid: int, report: FloodReport, flood_s: float) -> None:
    host, port = "127.0.0.1", int(url.rsplit(":", 1)[1])
    n = report.connections
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        long_job = await client.post("/v1/jobs", json=LONG_JOB | {"params": _sim(flood_s + 10)})
        long_id = long_job.json()["id"]
        stop = asyncio.Event()
        holders = [asyncio.create_task(_hold_idle(host, port, stop)) for _ in range(n)]
        holders += [
            asyncio.create_task(_hold_wait(host, port, long_id, stop, report.wait_answers))
            for _ in range(n)
        ]
        holders += [
            asyncio.create_task(_hold_stalled_body(host, port, stop)) for _ in range(n // 8)
        ]
        probe = asyncio.create_task(_probe_health(url, stop, report))
        submitter = asyncio.create_task(_submit_short_jobs(client, stop))
        await asyncio.sleep(flood_s)
        report.rss_flood_kib = read_rss_kib(pid)
        stop.set()
        await asyncio.gather(*holders, probe)
        ids = [long_id, *await submitter]
        deadline = time.monotonic() + 60
        for job_id in ids:
            while True:
                job = (await client.get(f"/v1/jobs/{job_id}", headers={"Prefer": "wait=30"})).json()
                if job["state"] in TERMINAL_STATES or time.monotonic() > deadline:
                    report.jobs[job["state"]] += 1
                    break


def _sim(seconds: float) -> dict[str, float | int]:
    return {"sim_seconds": seconds, "sim_steps": int(seconds * 10)}


def run_floods(fd_limit: int, flood_s: float, settle_s: float) -> FloodReport:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # the flood's own sockets
    report = FloodReport(fd_limit=fd_limit, connections=2 * fd_limit)
    with running_server(
        wrap=["prlimit", f"--nofile={fd_limit}:{fd_limit}", "--"],
        log_level="info",
        sim_lanes=2,
    ) as server:
        time.sleep(1)
        report.rss_before_kib = server.rss_kib()
        asyncio.run(_flood(server.url, server.pid, report, flood_s))
        time.sleep(settle_s)
        report.rss_after_kib = server.rss_kib()
        log = server.log_path.read_text(errors="replace")
    report.fd_errors = log.count("Too many open files")
    report.fsync_errors = log.count("could not fsync")
    return report


def _print(report: FloodReport) -> None:
    ms = report.health_ms
    print(
        f"open-files limit {report.fd_limit}; flood: {report.connections} idle connections, "
        f"{report.connections} held waits, {report.connections // 8} stalled bodies"
    )
    print(
        "| /healthz p50 ms | p99 ms | answered | failed | jobs | fd errors | fsync errors "
        "| RSS MB before | during | after |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    p50 = f"{percentile(ms, 0.5):.1f}" if ms else "-"
    p99 = f"{percentile(ms, 0.99):.1f}" if ms else "-"
    failed = sum(report.health_failures.values())
    jobs = ", ".join(f"{count} {state}" for state, count in sorted(report.jobs.items()))
    print(
        f"| {p50} | {p99} | {len(ms)} | {failed} {dict(report.health_failures) or ''} | {jobs} "
        f"| {report.fd_errors} | {report.fsync_errors} | {report.rss_before_kib / 1024:.0f} "
        f"| {report.rss_flood_kib / 1024:.0f} | {report.rss_after_kib / 1024:.0f} |"
    )
    print(f"held waits' answers: {dict(report.wait_answers)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fd-limit", type=int, default=1024)
    parser.add_argument("--flood-s", type=float, default=20.0)
    parser.add_argument("--settle-s", type=float, default=60.0)
    args = parser.parse_args()
    _print(run_floods(args.fd_limit, args.flood_s, args.settle_s))


if __name__ == "__main__":
    main()
