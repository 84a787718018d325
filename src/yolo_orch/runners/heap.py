"""glibc's heap, set so that a forward pass on the CPU reuses the memory the last one freed.

A pass allocates its activations afresh (tens of MiB for 8 images at imgsz 320). With glibc's
defaults a worker thread's are handed back to the kernel once freed and faulted in again,
zeroed, by the next pass: 5,700-14,600 page faults and 10-27 ms of system time in a pass of 8
images (167-182 ms), against none (147-160 ms) as set here (`bench.forward_heap`). Two
settings are needed:
- thresholds: blocks under half of `retain_bytes` (at most 32 MiB) come from the heap, which
  keeps up to `retain_bytes` free;
- one arena: a thread's own arena deletes each of its 64 MiB heaps the moment it empties,
  whatever the thresholds say; the main arena follows them. All threads then share one malloc
  lock: on the cpu lane a gain all the same (`bench.small_jobs`), not measured with many GPU
  lanes allocating at once (`heap_retain_mb = 0` turns all this off).
The price is memory: resident size stays near its peak between jobs, up to `retain_bytes`.
"""

from __future__ import annotations

import ctypes
import logging
import platform

log = logging.getLogger(__name__)

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8
_MMAP_THRESHOLD_MAX = 32 << 20
"""glibc's ceiling for `M_MMAP_THRESHOLD` on 64-bit hosts: larger blocks are always mapped."""


def keep_freed_memory(retain_bytes: int) -> bool:
    """Set glibc's heap as above, process-wide; call it before the process starts threads (a
    thread that has allocated keeps its arena). 0 leaves glibc's defaults. True when glibc
    took every setting."""
    if retain_bytes <= 0 or platform.libc_ver()[0] != "glibc":
        return False
    mallopt = ctypes.CDLL(None).mallopt
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    settings = (
        (_M_ARENA_MAX, 1),
        (_M_MMAP_THRESHOLD, min(_MMAP_THRESHOLD_MAX, retain_bytes // 2)),
        (_M_TRIM_THRESHOLD, min(retain_bytes, 2**31 - 1)),
    )
    refused = [option for option, value in settings if not mallopt(option, value)]
    if refused:
        log.warning("glibc refused heap options %s for %d bytes", refused, retain_bytes)
    return not refused
