"""`/healthz` latency while every lane runs REAL inference (runtime auto: on this CPU host, one
`cpu` lane), and while a real training job runs when the server supports training.

    python -m bench.loop_health_real [--seconds 8] [--imgsz 320]

The lanes are kept busy by inference jobs of 200 generated images each (queued several deep);
probes go back to back, one at a time, for `--seconds`. A phase counts only if a job was
running at its end as well as at its start.
"""

from __future__ import annotations

import argparse
import time

import httpx

from bench._server import percentile
from bench._yolo import (
    JOB_TIMEOUT_S,
    inference_job,
    real_server,
    training_probe,
    workspace,
)
from yolo_orch.testing import wait_terminal


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=8.0, help="probing time per phase")
    parser.add_argument("--imgsz", type=int, default=320)
    args = parser.parse_args()

    results: list[tuple[str, list[float]]] = []
    training_note = ""
    with (
        workspace({"many": 200}, dataset=True) as ws,
        real_server(ws) as server,
        httpx.Client(base_url=server.url, timeout=30) as client,
    ):
        lanes = [lane["id"] for lane in client.get("/v1/devices").json()["devices"]]
        results.append(("idle", probe_for(client, args.seconds)))

        # Warm the model first, so the phase measures steady inference, not the first load.
        warm = client.post("/v1/jobs", json=inference_job(["many/img0.jpg"], args.imgsz)).json()
        wait_terminal(client, warm["id"], JOB_TIMEOUT_S)
        jobs = [
            client.post("/v1/jobs", json=inference_job(["many/*.jpg"], args.imgsz)).json()["id"]
            for _ in range(len(lanes) * 3)
        ]
        wait_running(client, jobs)
        samples = probe_for(client, args.seconds)
        still = wait_running(client, jobs, timeout_s=0)
        label = f"inference {len(lanes)}/{len(lanes)} lanes"
        results.append((label if still else f"{label} (ENDED EARLY)", samples))
        for job in jobs:
            client.post(f"/v1/jobs/{job}/cancel")
        for job in jobs:
            wait_terminal(client, job, JOB_TIMEOUT_S)

        response = training_probe(client, epochs=50)
        if response.status_code != 202:
            training_note = f"training: refused {response.status_code} {response.text}"
        else:
            job = response.json()["id"]
            wait_running(client, [job], timeout_s=60)
            samples = probe_for(client, args.seconds)
            state = client.get(f"/v1/jobs/{job}").json()["state"]
            label = "training" if state == "running" else f"training (ended {state})"
            results.append((label, samples))
            client.post(f"/v1/jobs/{job}/cancel")
            wait_terminal(client, job, JOB_TIMEOUT_S)

    print(f"lanes: {', '.join(lanes)}; imgsz {args.imgsz}; {args.seconds:.0f} s of probes/phase")
    print(f"{'phase':>28} {'probes':>7} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7}")
    for label, samples in results:
        print(
            f"{label:>28} {len(samples):>7} {percentile(samples, 0.5):>7.2f} "
            f"{percentile(samples, 0.99):>7.2f} {max(samples):>7.2f}"
        )
    if training_note:
        print(training_note)


def wait_running(client: httpx.Client, jobs: list[str], timeout_s: float = 120) -> bool:
    """True once one of `jobs` is running (checked at least once)."""
    deadline = time.monotonic() + timeout_s
    while True:
        states = [client.get(f"/v1/jobs/{job}").json()["state"] for job in jobs]
        if "running" in states:
            return True
        if time.monotonic() >= deadline:
            if timeout_s:
                raise TimeoutError(f"no job running after {timeout_s}s: {states}")
            return False
        time.sleep(0.02)


def probe_for(client: httpx.Client, seconds: float) -> list[float]:
    samples: list[float] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        started = time.perf_counter()
        client.get("/healthz").raise_for_status()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


if __name__ == "__main__":
    main()
