"""`runners.heap.keep_freed_memory`: a pass in a worker thread reuses what the last one freed.

Each side runs in a fresh interpreter, since the setting is process-wide and must come before
the process's first thread: a few convolutions over 8 images of 320x320 (~40 MiB of
activations), in a worker thread, counting that thread's minor page faults per pass."""

from __future__ import annotations

import json
import platform
import subprocess
import sys

import pytest

from yolo_orch.runners.heap import keep_freed_memory

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's heap")

_PASSES = """
import json, resource, sys, threading
from yolo_orch.runners.heap import keep_freed_memory
kept = keep_freed_memory(int(sys.argv[1]))
import torch
torch.set_num_threads(1)
conv = torch.nn.Sequential(
    torch.nn.Conv2d(3, 16, 3, 2, 1), torch.nn.SiLU(), torch.nn.Conv2d(16, 32, 3, 2, 1),
    torch.nn.SiLU(), torch.nn.Conv2d(32, 32, 3, 1, 1),
)
faults = []
def run():
    with torch.inference_mode():
        images = torch.rand(8, 3, 320, 320)
        for _ in range(3):
            conv(images)
        before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
        for _ in range(5):
            conv(images)
        faults.append((resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before) / 5)
thread = threading.Thread(target=run)
thread.start()
thread.join()
print(json.dumps({"kept": kept, "faults": faults[0]}))
"""


def _side(retain_bytes: int) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", _PASSES, str(retain_bytes)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    side: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return side


def test_passes_in_a_worker_thread_reuse_the_memory_the_last_pass_freed() -> None:
    defaults, kept = _side(0), _side(64 << 20)
    assert not defaults["kept"]
    assert kept["kept"]
    assert defaults["faults"] > 1000  # each pass faults its activations in again
    assert kept["faults"] < 100


def test_zero_leaves_the_heap_alone() -> None:
    assert keep_freed_memory(0) is False
