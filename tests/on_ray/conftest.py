"""A Ray cluster of two nodes with two logical GPUs each, in this loopback-only namespace.

Tests here are marked `ray` and skip unless the process sees no network interface but `lo`:
`python -m tests.on_ray.netns` runs them under `unshare -n` (the Makefile's `test` does). The
fixtures (`cluster`, `own_cluster`) live in `tests/on_ray/fixtures.py`.
"""

from __future__ import annotations

import pytest

from tests.on_ray.fixtures import why_ray_cannot_start


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    reason = why_ray_cannot_start()
    if reason is None:
        return
    for item in items:
        if item.get_closest_marker("ray") is not None:
            item.add_marker(pytest.mark.skip(reason=reason))
