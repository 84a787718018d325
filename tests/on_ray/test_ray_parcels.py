"""What a job carries to a Ray node and what the node checks before it runs, without a cluster:
inputs read on the server under its rules, written into the node's job folder; datasets only
under the shared roots."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from yolo_orch.domain import Job, JobKind, JobState
from yolo_orch.domain.specs import InferenceSpec
from yolo_orch.errors import DatasetNotShared, InvalidJobInput
from yolo_orch.runners.base import RunContext
from yolo_orch.testing.yolo import make_images, write_corrupt

pytest.importorskip("ray")  # the parcels go in a Ray task

from yolo_orch.ray_cluster.node_runtime import check_shared_dataset, place_inputs
from yolo_orch.ray_cluster.parcels import InputRules, ship_inputs


def job(spec: dict[str, Any], kind: JobKind = JobKind.INFERENCE) -> Job:
    return Job(
        id="job-1",
        seq=1,
        kind=kind,
        state=JobState.RUNNING,
        model="tiny",
        model_id="m1",
        spec=spec,
        priority=0,
        gpus=1,
        devices=(),
        attempt=1,
        max_attempts=3,
        created_at=datetime.now(UTC),
    )


def context(the_job: Job, workdir: Path) -> RunContext:
    return RunContext(the_job, ("n1/cpu",), workdir, lambda _: None, lambda: False)


def rules(root: Path, **changes: Any) -> InputRules:
    values: dict[str, Any] = {
        "data_roots": (root,),
        "max_files": 10,
        "max_image_pixels": 1_000_000,
        "max_bytes": 1 << 20,
    }
    return InputRules(**{**values, **changes})


def files(*entries: tuple[Path, str]) -> dict[str, Any]:
    return {"files": [{"path": str(path), "name": name} for path, name in entries]}


def test_inputs_travel_as_bytes_and_land_in_the_nodes_job_folder(tmp_path: Path) -> None:
    root, workdir = tmp_path / "data", tmp_path / "jobs" / "job-1"
    [shot] = make_images(root / "shots", 1)
    [upload] = make_images(workdir / "inputs", 1, seed=1)
    junk = write_corrupt(root / "junk.jpg")
    outside = make_images(tmp_path / "elsewhere", 1)[0]
    (root / "leak.jpg").symlink_to(outside)  # swapped in after submission
    spec = files(
        (shot, "shots/img0.jpg"),
        (upload, "mine.jpg"),
        (junk, "junk.jpg"),
        (root / "leak.jpg", "leak.jpg"),
    )
    the_job = job({**spec, "params": {}})

    shipped = ship_inputs(context(the_job, workdir), rules(root))

    assert [item.data for item in shipped[:2]] == [shot.read_bytes(), upload.read_bytes()]
    assert (shipped[2].data, shipped[2].refused) == (None, "cannot decode the file as an image")
    assert shipped[3].data is None
    assert shipped[3].refused == "refused: the file now leads outside the data roots"

    node_workdir = tmp_path / "node" / "job-1"
    placed = place_inputs(the_job, shipped, node_workdir)
    entries = [entry.stored() for entry in placed.spec_as(InferenceSpec).files or []]
    assert [entry["name"] for entry in entries] == [entry["name"] for entry in spec["files"]]
    assert Path(entries[0]["path"]).read_bytes() == shot.read_bytes()
    assert Path(entries[0]["path"]).is_relative_to(node_workdir / "inputs")
    assert Path(entries[1]["path"]).name == upload.name
    assert "refused" not in entries[0]
    assert entries[3]["refused"] == shipped[3].refused
    assert not Path(entries[3]["path"]).exists()
    assert the_job.spec.stored()["files"] == spec["files"]  # the server's job is unchanged


def test_an_image_over_the_pixel_limit_travels_as_its_refusal(tmp_path: Path) -> None:
    [shot] = make_images(tmp_path / "data", 1)  # 160 x 120
    the_job = job(files((shot, "big.jpg")))
    small = rules(tmp_path / "data", max_image_pixels=100)
    [item] = ship_inputs(context(the_job, tmp_path / "w"), small)
    assert item.data is None
    assert item.refused is not None
    assert "max_image_pixels" in item.refused


def test_inputs_over_their_limits_fail_the_job(tmp_path: Path) -> None:
    root = tmp_path / "data"
    shots = make_images(root, 3)
    the_job = job(files(*((shot, shot.name) for shot in shots)))
    ctx = context(the_job, tmp_path / "w")
    with pytest.raises(InvalidJobInput, match="max_files_per_job"):
        ship_inputs(ctx, rules(root, max_files=2))
    total = sum(shot.stat().st_size for shot in shots)
    with pytest.raises(InvalidJobInput, match="ray_max_input_bytes"):
        ship_inputs(ctx, rules(root, max_bytes=total - 1))
    assert len(ship_inputs(ctx, rules(root, max_bytes=total))) == 3


def test_a_video_that_cannot_be_read_fails_the_job_on_the_server(tmp_path: Path) -> None:
    root = tmp_path / "data"
    root.mkdir()
    outside = tmp_path / "clip.mp4"
    outside.write_bytes(b"not read")
    (root / "clip.mp4").symlink_to(outside)
    the_job = job(files((root / "clip.mp4", "clip.mp4")))
    with pytest.raises(InvalidJobInput, match="outside the data roots"):
        ship_inputs(context(the_job, tmp_path / "w"), rules(root))


def test_a_dataset_must_be_under_a_shared_root_and_on_the_node(tmp_path: Path) -> None:
    shared, local = tmp_path / "shared", tmp_path / "local"
    (shared / "ds").mkdir(parents=True)
    (shared / "ds" / "data.yaml").write_text("names: [a]\n")
    (local / "ds").mkdir(parents=True)
    (local / "ds" / "data.yaml").write_text("names: [a]\n")
    (shared / "link.yaml").symlink_to(local / "ds" / "data.yaml")

    def training(path: Path) -> Job:
        return job({"dataset": "ds/data.yaml", "dataset_path": str(path)}, JobKind.TRAINING)

    check_shared_dataset(training(shared / "ds" / "data.yaml"), [str(shared)], "node1")
    check_shared_dataset(job(files()), [], "node1")  # no dataset: nothing to check
    failures = {
        "no shared_data_roots": (shared / "ds" / "data.yaml", []),
        "is not under shared_data_roots": (local / "ds" / "data.yaml", [str(shared)]),
        "leads out": (shared / "link.yaml", [str(shared)]),
        "is not on Ray node node1": (shared / "gone" / "data.yaml", [str(shared)]),
    }
    for why, (path, roots) in failures.items():
        with pytest.raises(DatasetNotShared) as failure:
            check_shared_dataset(training(path), roots, "node1")
        assert failure.value.code == "dataset_not_shared"
        expected = "is not under shared_data_roots" if why == "leads out" else why
        assert expected in failure.value.message, why
    assert os.path.exists(shared / "ds" / "data.yaml")


class Registry:
    """What `RegistersResults` asks of the registry, recorded."""

    def __init__(self) -> None:
        self.unusable: list[str] = []
        self.registered: list[tuple[Path, str, str]] = []

    async def mark_unusable(self, model_id: str) -> None:
        self.unusable.append(model_id)

    async def register_file(self, path: Path, name: str, source: str) -> Any:
        from yolo_orch.domain import Model

        self.registered.append((path, name, source))
        now = datetime.now(UTC)
        return Model("m2", name, "0" * 64, 1, "detect", ("a",), source, "f.pt", now)


class Runs:
    starts_unclaimed = True

    def __init__(self, outcome: Any) -> None:
        self.outcome = outcome

    async def run(self, ctx: RunContext) -> Any:
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome

    async def run_batch(self, ctxs: list[RunContext]) -> list[Any]:
        return [self.outcome]


async def test_what_a_node_hands_back_is_registered_on_the_server(tmp_path: Path) -> None:
    from yolo_orch.domain import JobResult
    from yolo_orch.ray_cluster.registration import RegistersResults, pending_model

    node_artifacts = tmp_path / "node" / "artifacts"
    node_artifacts.mkdir(parents=True)
    (node_artifacts / "best.pt").write_bytes(b"trained weights")
    view = pending_model(node_artifacts / "best.pt", "trained")
    result = JobResult({"model_id": view["id"], "epochs": 1}, {"model": view, "epochs": 1})
    workdir = tmp_path / "server"
    (workdir / "artifacts").mkdir(parents=True)
    (workdir / "artifacts" / "best.pt").write_bytes(b"trained weights")  # back with FilesBack
    ctx = context(job({}, JobKind.TRAINING), workdir)
    registry = Registry()

    [done] = await RegistersResults(Runs(result), registry).run_batch([ctx])

    assert registry.registered == [(workdir / "artifacts" / "best.pt", "trained", "training:job-1")]
    assert isinstance(done, JobResult)
    assert done.summary == {"model_id": "m2", "epochs": 1}
    assert done.detail["model"]["id"] == "m2"

    (workdir / "artifacts" / "best.pt").write_bytes(b"cut short")
    with pytest.raises(RuntimeError, match="did not come back whole"):
        await RegistersResults(Runs(result), registry).run(ctx)
    with pytest.raises(RuntimeError, match="only a job's artifacts"):
        pending_model(tmp_path / "node" / "other.pt", "x")


async def test_a_model_a_node_found_tampered_is_marked_unusable(tmp_path: Path) -> None:
    from yolo_orch.errors import ModelTampered
    from yolo_orch.ray_cluster.registration import RegistersResults

    registry = Registry()
    tampered = ModelTampered(Path("tiny.pt"), "a" * 64, "b" * 64)
    runs = RegistersResults(Runs(tampered), registry)
    with pytest.raises(ModelTampered):
        await runs.run(context(job({}), tmp_path))
    assert registry.unusable == ["m1"]
    other = RegistersResults(Runs(InvalidJobInput("bad")), registry)
    with pytest.raises(InvalidJobInput):
        await other.run(context(job({}), tmp_path))
    assert registry.unusable == ["m1"]
