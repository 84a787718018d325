"""The cpu lane's forward pass, eager and traced (`runners/traced.py`), alone and beside a Python
thread that holds the GIL part of the time (as the server's event loop and store writer do):

    python -m bench.traced_forward [--batch 8] [--imgsz 320] [--busy 0.2] [--repeats 15]

yolo11n built from its shipped yaml, one 640x480 image letterboxed to imgsz (320x256 at 320),
torch at the cpu lane's thread count; the two forwards alternate, and the median of each prints.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench._yolo import configure


def busy_thread(share: float, stop: threading.Event) -> threading.Thread:
    """A thread running Python `share` of each 2 ms, sleeping the rest."""

    def spin() -> None:
        while not stop.is_set():
            started = time.perf_counter()
            while time.perf_counter() - started < 0.002 * share:
                pass
            time.sleep(0.002 * (1 - share))

    return threading.Thread(target=spin, daemon=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--imgsz", type=int, default=320)
    parser.add_argument("--busy", type=float, default=0.2)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        configure(Path(tmp))
        import numpy as np
        import torch
        from ultralytics.models import YOLO

        from tests.yolo_fixtures import build_checkpoint
        from yolo_orch.runners.inference import default_cpu_threads
        from yolo_orch.runners.traced import TracedForward, trace_forward

        threads = default_cpu_threads()
        torch.set_num_threads(threads)
        model = YOLO(str(build_checkpoint(Path(tmp) / "tiny.pt")))
        model.predict(np.zeros((480, 640, 3), np.uint8), imgsz=args.imgsz, verbose=False)
        traced = trace_forward(model)
        assert isinstance(traced, TracedForward)
        height = args.imgsz * 4 // 5 // 32 * 32 or 32  # what the letterbox gives a 4:3 image
        im = torch.rand(args.batch, 3, height, args.imgsz)
        passes: dict[str, Callable[[], Any]] = {
            "eager": lambda: traced.eager(im),
            "traced": lambda: traced(im),
        }
        rows = []
        with torch.inference_mode():
            traced(im)  # traced on its first pass
            for busy in (0.0, args.busy):
                stop = threading.Event()
                if busy:
                    busy_thread(busy, stop).start()
                times: dict[str, list[float]] = {name: [] for name in passes}
                for _ in range(args.repeats):
                    for name, run in passes.items():
                        started = time.perf_counter()
                        run()
                        times[name].append(time.perf_counter() - started)
                stop.set()
                rows.append((busy, {k: statistics.median(v) * 1000 for k, v in times.items()}))
    print(f"yolo11n, batch {args.batch}x3x{height}x{args.imgsz}, {threads} torch thread(s)")
    print("| busy Python thread | eager ms | traced ms |")
    print("|---|---|---|")
    for busy, ms in rows:
        print(f"| {busy:.0%} | {ms['eager']:.0f} | {ms['traced']:.0f} |")


if __name__ == "__main__":
    main()
