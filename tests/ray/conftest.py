"""A Ray cluster of two nodes with two logical GPUs each, in this loopback-only namespace.

Tests here are marked `ray` and skip unless the process sees no network interface but `lo`:
`python -m tests.ray.netns` runs them under `unshare -n` (the Makefile's `test` does).
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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if importlib.util.find_spec("ray") is None:
        reason = "needs the ray extra: pip install -e '.[ray]'"
    elif not loopback_only():
        reason = (
            "starts Ray, which binds every interface: run in a loopback-only network "
            "namespace with `python -m tests.ray.netns`"
        )
    else:
        return
    for item in items:
        if item.get_closest_marker("ray") is not None:
            item.add_marker(pytest.mark.skip(reason=reason))


def start_cluster(nodes: int = NODES, gpus: int = GPUS_PER_NODE) -> Any:
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
