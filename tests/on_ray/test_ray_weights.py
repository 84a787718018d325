"""The executor on its own, against the cluster: weights follow the job to the node and are
verified there, progress arrives whole and in order, the job folder travels both ways, and each
run's start is journaled before its task leaves (so it may start unclaimed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.ray_weights import Rig, context, job, rig
from yolo_orch.domain import Progress
from yolo_orch.errors import YoloOrchError
from yolo_orch.files.start_journal import Started

__all__ = ["rig"]  # the fixture, from tests/support/ray_weights.py

pytestmark = pytest.mark.ray


async def test_weights_travel_to_a_node_that_lacked_them(rig: Rig, tmp_path: Path) -> None:
    first, second = rig.node_ids()
    seen: list[Progress] = []
    workdir = tmp_path / "job-1"
    workdir.mkdir()
    (workdir / "sim-runs.log").write_text("attempt 0 succeeded\n")

    assert rig.executor.starts_unclaimed
    await rig.executor.run(context(job("job-1"), rig.lane_on(first), workdir, seen))
    assert rig.starts.read() == [Started("job-1", 1, (rig.lane_on(first),))]

    assert (rig.cache / first / f"{rig.sha256}.pt").read_bytes() == rig.weights.read_bytes()
    assert not (rig.cache / second).exists()
    assert rig.executor.node_models[first[:12]] == [rig.sha256]
    assert [progress.done for progress in seen] == [1, 2, 3, 4, 5]
    # the job folder went to the node and what the run changed came back
    assert (workdir / "sim-runs.log").read_text().splitlines() == [
        "attempt 0 succeeded",
        "attempt 1 succeeded",
    ]


async def test_a_tampered_copy_is_refused(rig: Rig, tmp_path: Path) -> None:
    node = rig.node_ids()[1]
    rig.weights.write_bytes(b"something else")  # the server's file changed after its import
    with pytest.raises(YoloOrchError) as failure:
        await rig.executor.run(context(job("job-2"), rig.lane_on(node), tmp_path / "j2", []))
    assert failure.value.code == "model_tampered"
    assert not (rig.cache / node / f"{rig.sha256}.pt").exists()


async def test_a_kept_copy_that_changed_is_fetched_again(rig: Rig, tmp_path: Path) -> None:
    node = rig.node_ids()[0]
    await rig.executor.run(context(job("job-3"), rig.lane_on(node), tmp_path / "j3", []))
    kept = rig.cache / node / f"{rig.sha256}.pt"
    kept.write_bytes(b"corrupted on the node")

    await rig.executor.run(context(job("job-4"), rig.lane_on(node), tmp_path / "j4", []))

    assert kept.read_bytes() == rig.weights.read_bytes()
