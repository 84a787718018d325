"""Start a real `yolo-orch serve` subprocess for a benchmark, on a free loopback port."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def running_server(**settings: object) -> Iterator[str]:
    """Yields the base URL; the server's data lives in a temporary folder."""
    with tempfile.TemporaryDirectory(prefix="yolo-orch-bench-") as tmp:
        port = free_port()
        env = dict(os.environ)
        env.update({f"YOLO_ORCH_{key.upper()}": str(value) for key, value in settings.items()})
        env.update(
            YOLO_ORCH_DATA_DIR=str(Path(tmp) / "var"),
            YOLO_ORCH_PORT=str(port),
            YOLO_ORCH_LOG_LEVEL="warning",
        )
        log_path = Path(os.environ.get("BENCH_SERVER_LOG", Path(tmp) / "server.log"))
        with log_path.open("w") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "yolo_orch.cli", "serve"], env=env, stdout=log, stderr=log
            )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 30
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                        break
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"server did not start: see {log_path}")
                time.sleep(0.1)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]
