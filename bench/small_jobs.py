"""Small real-time requests: 32 concurrent clients, each sending one 640x480 JPEG per request, in
one run against the same checkpoint (yolo11n built from its shipped yaml, untrained) at one imgsz:

- direct: ultralytics `predict` in one process, no HTTP: image by image (batch 1), and on lists
  of `--batch` images (what this CPU's batched forward pass gives one process);
- LitServe serving the checkpoint, without and with its batching (`max_batch_size`);
- yolo-orch on its cpu lane, 1-image upload jobs with `Prefer: wait`, batching off
  (`batch_max_images.cpu = 1`) and on, a fresh server each.

    python -m bench.small_jobs [--seconds 20] [--clients 32] [--imgsz 320] [--batch 8]

Prints images/s, p50/p99 latency per request (per image for direct, which waits for its batch)
and the mean batch size (jobs per run from yolo-orch's /v1/devices; images per predict from
LitServe's workers), then yolo-orch with batching against the other sides of the same run. torch
uses the same thread count everywhere: the cpu lane's default (`default_cpu_threads`).
LitServe is a `bench` extra (`pip install -e '.[bench]'`), never a runtime dependency.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench._litserve import LITSERVE_BATCH_LOG
from bench._yolo import MODEL, Workspace, real_server, workspace
from yolo_orch.testing import TERMINAL_STATES, free_port


@dataclass
class Row:
    side: str
    images: int
    seconds: float
    latencies: list[float]
    mean_batch: float | None

    @property
    def rate(self) -> float:
        """Images a second."""
        return self.images / self.seconds

    def line(self) -> str:
        ordered = sorted(self.latencies)
        p50 = statistics.median(ordered) * 1000
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000
        batch = "-" if self.mean_batch is None else f"{self.mean_batch:.2f}"
        return f"| {self.side} | {self.rate:.1f} | {p50:.0f} | {p99:.0f} | {batch} |"


def jpeg(path: Path) -> bytes:
    import cv2
    import numpy as np

    rng = np.random.default_rng(0)
    image = rng.integers(0, 255, size=(480, 640, 3), dtype=np.uint8)
    ok, encoded = cv2.imencode(".jpg", image)
    if not ok:
        raise RuntimeError("cv2 could not encode the image")
    path.parent.mkdir(parents=True, exist_ok=True)  # the server's data root
    path.write_bytes(encoded.tobytes())
    return encoded.tobytes()


async def hammer(
    clients: int, seconds: float, request: Callable[[httpx.AsyncClient], Awaitable[None]], url: str
) -> tuple[int, list[float]]:
    """`clients` loops sending one request after another for `seconds`; the finished requests'
    latencies."""
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds
    limits = httpx.Limits(max_connections=clients)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:

        async def loop() -> None:
            while time.perf_counter() < deadline:
                started = time.perf_counter()
                await request(client)
                latencies.append(time.perf_counter() - started)

        await asyncio.gather(*(loop() for _ in range(clients)))
    return len(latencies), latencies


def direct(ws: Workspace, image: bytes, imgsz: int, seconds: float, batch: int) -> Row:
    """`batch` images decoded, then predicted in one call, over and over: batch 1 is the loop a
    user would write; a larger batch is what one process gets from this CPU's batched forward
    pass, the ceiling a server's batching approaches."""
    import cv2
    import numpy as np
    import torch
    from ultralytics.models import YOLO

    from yolo_orch.runners.inference import default_cpu_threads

    torch.set_num_threads(default_cpu_threads())
    model = YOLO(str(ws.weights))
    model.predict(np.zeros((imgsz, imgsz, 3), np.uint8), imgsz=imgsz, device="cpu", verbose=False)
    latencies = []
    deadline = time.perf_counter() + seconds
    started = time.perf_counter()
    while time.perf_counter() < deadline:
        begun = time.perf_counter()
        pixels = [
            cv2.imdecode(np.frombuffer(image, np.uint8), cv2.IMREAD_COLOR) for _ in range(batch)
        ]
        model.predict(pixels, imgsz=imgsz, device="cpu", verbose=False)
        latencies += [time.perf_counter() - begun] * batch  # each image waits for its batch
    label = f"direct predict, batch {batch}"
    return Row(label, len(latencies), time.perf_counter() - started, latencies, batch)


def yolo_orch(
    ws: Workspace, image: bytes, imgsz: int, seconds: float, clients: int, batch: int
) -> Row:
    params = f'{{"imgsz": {imgsz}}}'

    async def request(client: httpx.AsyncClient) -> None:
        response = await client.post(
            "/v1/jobs/inference",
            headers={"Prefer": "wait=60"},
            data={"model": MODEL, "params": params},
            files={"images": ("shot.jpg", image, "image/jpeg")},
        )
        job = response.json()
        while job["state"] not in TERMINAL_STATES:  # a 202: not in time
            job = (await client.get(f"/v1/jobs/{job['id']}", headers={"Prefer": "wait=60"})).json()
        if job["state"] != "succeeded":
            raise RuntimeError(f"job {job['id']} {job['state']}: {job.get('error')}")

    with real_server(ws, lanes=["cpu"], batch_max_images={"cpu": batch}) as server:
        asyncio.run(hammer(1, 2, request, server.url))  # load and warm the model
        with httpx.Client(base_url=server.url) as client:
            before = _runs(client)
        started = time.perf_counter()
        count, latencies = asyncio.run(hammer(clients, seconds, request, server.url))
        elapsed = time.perf_counter() - started
        with httpx.Client(base_url=server.url) as client:
            after = _runs(client)
    runs = {size: after.get(size, 0) - before.get(size, 0) for size in after}
    total = sum(runs.values())
    mean = sum(size * n for size, n in runs.items()) / total if total else 1.0
    label = "yolo-orch, batching off" if batch == 1 else f"yolo-orch, batching {batch}"
    return Row(label, count, elapsed, latencies, mean)


def _runs(client: httpx.Client) -> dict[int, int]:
    lane = client.get("/v1/devices").json()["devices"][0]
    return {int(size): int(count) for size, count in lane["batch_sizes"].items()}


def litserve(
    ws: Workspace, image: bytes, imgsz: int, seconds: float, clients: int, batch: int
) -> Row:
    body = {"image": base64.b64encode(image).decode()}

    async def request(client: httpx.AsyncClient) -> None:
        response = await client.post("/predict", json=body)
        response.raise_for_status()

    with tempfile.TemporaryDirectory() as tmp, _litserve(ws, imgsz, batch, Path(tmp)) as url:
        asyncio.run(hammer(1, 2, request, url))
        log = Path(tmp) / "batches.log"
        warm = len(log.read_text().split()) if log.exists() else 0
        started = time.perf_counter()
        count, latencies = asyncio.run(hammer(clients, seconds, request, url))
        elapsed = time.perf_counter() - started
        sizes = [int(size) for size in log.read_text().split()[warm:]]
    mean = sum(sizes) / len(sizes) if sizes else None
    label = "LitServe, unbatched" if batch == 1 else f"LitServe, max_batch_size {batch}"
    return Row(label, count, elapsed, latencies, mean)


@contextlib.contextmanager
def _litserve(ws: Workspace, imgsz: int, batch: int, tmp: Path) -> Iterator[str]:
    port = free_port()
    env = {**os.environ, LITSERVE_BATCH_LOG: str(tmp / "batches.log")}
    command = [sys.executable, "-m", "bench._litserve", str(ws.weights)]
    command += ["--imgsz", str(imgsz), "--batch", str(batch), "--port", str(port)]
    with (tmp / "litserve.log").open("w") as log:
        # A session of its own: LitServe's workers are processes of their own, stopped with it.
        process = subprocess.Popen(command, env=env, stdout=log, stderr=log, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/health", timeout=1).text == "ok":
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"LitServe did not start: {(tmp / 'litserve.log').read_text()}")
            time.sleep(0.2)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--imgsz", type=int, default=320)
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()
    with workspace({}) as ws:
        image = jpeg(ws.data / "shot.jpg")
        rows = [direct(ws, image, args.imgsz, args.seconds, batch) for batch in (1, args.batch)]
        for batch in (1, args.batch):
            rows.append(litserve(ws, image, args.imgsz, args.seconds, args.clients, batch))
        for batch in (1, args.batch):
            rows.append(yolo_orch(ws, image, args.imgsz, args.seconds, args.clients, batch))
    print(f"{args.clients} clients x {args.seconds:g} s, one 640x480 JPEG per request, ", end="")
    print(f"imgsz {args.imgsz}, cpu; load average {os.getloadavg()[0]:.1f}")
    print("| side | img/s | p50 ms | p99 ms | mean batch |")
    print("|---|---|---|---|---|")
    for row in rows:
        print(row.line())
    batched = rows[-1]
    print(f"\n{batched.side} against:")
    for row in rows[:-1]:
        print(f"- {row.side}: {batched.rate / row.rate:.2f}")


if __name__ == "__main__":
    main()
