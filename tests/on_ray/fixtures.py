"""The Ray clusters tests start, only in a loopback-only network namespace.

Fixtures here are imported by `tests/conftest.py`, so that the acceptance tests parametrised
over executors share the one session cluster with `tests/on_ray`.
"""

from __future__ import annotations

import importlib.util
import socket
from collections.abc import Iterator
from typing import Any

import pytest

NODES = 2
GPUS_PER_NODE = 2


def loopback_only() -> bool:
    return {name for _, name in socket.if_nameindex()} == {"lo"}


def why_ray_cannot_start() -> str | None:
    if importlib.util.find_spec("ray") is None:
        return "needs the ray extra: pip install -e '.[ray]'"
    if not loopback_only():
        return (
            "starts Ray, which binds every interface: run in a loopback-only network "
            "namespace with `python -m tests.on_ray.netns`"
        )
    return None


def start_cluster(nodes: int = NODES, gpus: int = GPUS_PER_NODE) -> Any:
    if reason := why_ray_cannot_start():  # whichever way the test was selected
        pytest.skip(reason)
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 0})
    for _ in range(nodes):
        cluster.add_node(num_cpus=1, num_gpus=gpus)
    cluster.wait_for_nodes()
    return cluster


@pytest.fixture(scope="session")
def cluster() -> Iterator[Any]:
    """Shared by the tests that leave it as they found it."""
    started = start_cluster()
    try:
        yield started
    finally:
        started.shutdown()


@pytest.fixture
def own_cluster() -> Iterator[Any]:
    """For a test that removes or adds nodes."""
    started = start_cluster()
    try:
        yield started
    finally:
        started.shutdown()
