"""The real-server harness that the tests and the benchmarks share: a `yolo-orch serve` subprocess
on a free port with a data folder of its own (`server`), jobs over HTTP with deadlines (`jobs`),
the crash and overload runs (`chaos`, `overload`), and tiny real models and generated data for
the real runtime (`yolo`, `training`, `task_datasets`, `video`; these import ultralytics, OpenCV
and numpy when called, so install the `yolo` extra to use them).

Plain functions and classes, no pytest: the tests wrap them in fixtures in their conftest.
"""

from yolo_orch.testing.jobs import (
    TERMINAL_STATES,
    list_jobs,
    sim_inference,
    sim_runs,
    sim_training,
    wait_all_terminal,
    wait_for,
    wait_terminal,
)
from yolo_orch.testing.server import (
    CheckFailed,
    Server,
    ServerExited,
    free_port,
    read_cpu_s,
    read_rss_kib,
    require,
    running_server,
)

__all__ = [
    "TERMINAL_STATES",
    "CheckFailed",
    "Server",
    "ServerExited",
    "free_port",
    "list_jobs",
    "read_cpu_s",
    "read_rss_kib",
    "require",
    "running_server",
    "sim_inference",
    "sim_runs",
    "sim_training",
    "wait_all_terminal",
    "wait_for",
    "wait_terminal",
]
