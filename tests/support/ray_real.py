"""A Ray cluster of CPU-only nodes running the real runtime, for the Ray tests of real jobs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.on_ray.fixtures import start_cluster
from yolo_orch.config import Settings

IMGSZ = 64


@pytest.fixture(scope="module")
def cpu_cluster() -> Iterator[Any]:
    """A head and one more node, neither with GPUs: two `<node>/cpu` lanes."""
    started = start_cluster(nodes=1, gpus=0)
    try:
        yield started
    finally:
        started.shutdown()


def cpu_host_settings(
    settings_factory: Callable[..., Settings],
    cluster: Any,
    tmp_path: Path,
    data: Path,
    weights: Path,
    **more: object,
) -> Settings:
    """A server on the real runtime, running its jobs on `cluster`'s `<node>/cpu` lanes."""
    return settings_factory(
        runtime="auto",
        database_url="",
        executor="ray",
        ray_address=cluster.address,
        ray_cpu_lanes=True,
        ray_poll_interval_s=0.2,
        ray_node_cache_dir=tmp_path / "node-cache",
        data_roots=[data],
        model_roots=[weights],
        **more,
    )
