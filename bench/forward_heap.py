"""A forward pass's memory, kept or handed back: yolo11n (built from its shipped yaml) predicting
8 noise images of 640x480 at imgsz 320 in a worker thread, 1 torch thread, in a fresh process
per side, with glibc's default heap and with the server's (`runners.heap.keep_freed_memory` at
`heap_retain_mb`, as `yolo-orch serve` sets it before its threads start). The sides alternate.

    python -m bench.forward_heap [--rounds 3] [--passes 20] [--retain-mb 64]

Prints, per side and round, the median wall time of a pass, and the system time and minor page
faults of the pass's thread (getrusage RUSAGE_THREAD), per pass.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def one_side(weights: str, retain_mb: int, passes: int) -> dict[str, float]:
    """In this (fresh) process: the figures of `passes` passes after two warm ones."""
    import resource
    import threading
    import time

    from yolo_orch.runners.heap import keep_freed_memory

    keep_freed_memory(retain_mb << 20)  # before the first thread, as the server does

    import numpy as np
    import torch
    from ultralytics.models import YOLO

    torch.set_num_threads(1)
    model = YOLO(weights)
    images = [np.random.default_rng(i).integers(0, 255, (480, 640, 3), np.uint8) for i in range(8)]
    figures: dict[str, float] = {}

    def run() -> None:
        for _ in range(2):
            model.predict(images, imgsz=320, device="cpu", verbose=False)
        before = resource.getrusage(resource.RUSAGE_THREAD)
        walls = []
        for _ in range(passes):
            started = time.perf_counter()
            model.predict(images, imgsz=320, device="cpu", verbose=False)
            walls.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_THREAD)
        figures["wall_ms"] = statistics.median(walls) * 1000
        figures["sys_ms"] = (after.ru_stime - before.ru_stime) / passes * 1000
        figures["faults"] = (after.ru_minflt - before.ru_minflt) / passes

    thread = threading.Thread(target=run)  # a lane's pass runs in a worker thread
    thread.start()
    thread.join()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--passes", type=int, default=20)
    parser.add_argument("--retain-mb", type=int, default=64)
    parser.add_argument("--side", nargs=2, metavar=("WEIGHTS", "RETAIN_MB"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        print(json.dumps(one_side(args.side[0], int(args.side[1]), args.passes)))
        return
    from bench._yolo import configure
    from tests.yolo_fixtures import build_checkpoint

    with tempfile.TemporaryDirectory(prefix="yolo-orch-bench-heap-") as tmp:
        configure(Path(tmp))
        weights = build_checkpoint(Path(tmp) / "tiny.pt")
        print(f"8 images of 640x480 at imgsz 320 per pass, {args.passes} passes per side")
        print("| round | heap | pass ms (median) | sys ms per pass | minor faults per pass |")
        print("|---|---|---|---|---|")
        walls: dict[int, list[float]] = {0: [], args.retain_mb: []}
        for round_ in range(1, args.rounds + 1):
            for retain in (0, args.retain_mb):
                command = [sys.executable, "-m", "bench.forward_heap", "--passes", str(args.passes)]
                command += ["--side", str(weights), str(retain)]
                out = subprocess.run(command, capture_output=True, text=True, check=True)
                side = json.loads(out.stdout.strip().splitlines()[-1])
                walls[retain].append(side["wall_ms"])
                label = "glibc defaults" if retain == 0 else f"kept ({retain} MiB)"
                print(
                    f"| {round_} | {label} | {side['wall_ms']:.0f} | {side['sys_ms']:.1f} "
                    f"| {side['faults']:.0f} |"
                )
        ratio = statistics.median(walls[0]) / statistics.median(walls[args.retain_mb])
        print(f"median pass, defaults / kept: {ratio:.2f}; load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
