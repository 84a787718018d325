"""The capture queue and its writer thread (`runners.dataset_capture`) against a dataset that
blocks or fails: the lane's side never waits, a full queue drops and counts, a job's summary
waits for what it queued. And the submission check that refuses capture on Ray lanes."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast

import anyio
import pytest

from yolo_orch.domain import Job, JobKind, JobState
from yolo_orch.domain.managed_datasets import DatasetInfo
from yolo_orch.errors import ErrorCode, InvalidJob, InvalidJobInput
from yolo_orch.files.class_names import DEFAULT_CLASS_NAME_LIMITS
from yolo_orch.files.inputs import InputLimits
from yolo_orch.kinds.submission import SubmissionChecks
from yolo_orch.params.capture import CaptureParams
from yolo_orch.runners.dataset_capture import CaptureWriter, job_capture

if TYPE_CHECKING:
    from yolo_orch.registry.models import ModelRegistry

NAMES = ("person", "car")


class BlockingDataset:
    """A dataset whose `add` holds the writer until `release` is set, and can fail."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.added: list[tuple[bytes, list[str], str | None, str | None]] = []
        self.fail = False

    def get(self, name: str) -> DatasetInfo:
        if name != "cams":
            raise LookupError(f"no managed dataset named {name!r}")
        return DatasetInfo(name, "detect", NAMES, None, datetime.now(UTC), {}, {}, {})

    def add(
        self,
        name: str,
        image: bytes,
        suffix: str,
        labels: Sequence[str],
        *,
        source: str,
        model_id: str | None = None,
        job_id: str | None = None,
    ) -> str:
        assert (name, suffix, source) == ("cams", ".jpg", "model")
        self.entered.set()
        self.release.wait(10)
        if self.fail:
            raise OSError("no space left on device")
        self.added.append((image, list(labels), model_id, job_id))
        return f"{len(self.added):06d}-abcdef"


def entry(confidence: float) -> dict[str, Any]:
    box = {"x1": 0.0, "y1": 0.0, "x2": 8.0, "y2": 4.0}
    found = {"class_id": 1, "class_name": "car", "confidence": confidence, "box": box}
    return {"width": 16, "height": 8, "detections": [found], "model_id": "m-2"}


def jpeg(marker: bytes) -> Any:
    return lambda: marker


@pytest.fixture
def dataset() -> BlockingDataset:
    return BlockingDataset()


@pytest.fixture
def writer(dataset: BlockingDataset) -> Iterator[CaptureWriter]:
    writer = CaptureWriter(dataset, queue_size=2)
    writer.start()
    yield writer
    dataset.release.set()
    writer.stop()


def job(**capture: Any) -> tuple[Job, CaptureParams]:
    params = CaptureParams.model_validate({"into": "cams", "when": {"every_n": 1}, **capture})
    running = Job(
        id=f"job-{id(params)}",
        seq=1,
        kind=JobKind.INFERENCE,
        state=JobState.RUNNING,
        model="sim",
        spec={"inputs": ["a.jpg"], "params": {"capture": params.model_dump()}},
        priority=0,
        gpus=1,
        attempt=1,
        max_attempts=1,
        created_at=datetime.now(UTC),
    )
    return running, params


def test_a_full_queue_drops_and_counts_while_the_writer_is_held(
    dataset: BlockingDataset, writer: CaptureWriter
) -> None:
    stuck, params = job()
    capture = writer.for_job(stuck, params)
    capture.offer(entry(0.5), jpeg(b"first"), 1)
    assert dataset.entered.wait(10)  # the writer holds the first image, the queue is empty
    for number in range(2, 7):  # two fit in the queue, three do not: none of them waits
        capture.offer(entry(0.5), jpeg(b"more"), number)
    dataset.release.set()
    assert capture.summary() == {"selected": 6, "captured": 3, "capped": 0, "dropped": 3}
    first_image, labels, model_id, job_id = dataset.added[0]
    assert (first_image, model_id, job_id) == (b"first", "m-2", stuck.id)
    assert labels == ["1 0.250000 0.250000 0.500000 0.500000"]


def test_dropped_images_take_no_place_under_the_caps(
    dataset: BlockingDataset, writer: CaptureWriter
) -> None:
    capped, params = job(max_total=4)
    capture = writer.for_job(capped, params)
    capture.offer(entry(0.5), jpeg(b"a"), 1)
    assert dataset.entered.wait(10)
    for number in range(2, 5):  # 2 queued, 1 dropped: 3 taken so far
        capture.offer(entry(0.5), jpeg(b"b"), number)
    dataset.release.set()
    assert capture.summary()["captured"] == 3
    for number in range(5, 8):  # the queue is free again: one more, then max_total
        capture.offer(entry(0.5), jpeg(b"c"), number)
    assert capture.summary() == {"selected": 7, "captured": 4, "capped": 2, "dropped": 1}


def test_a_failed_write_counts_as_dropped(dataset: BlockingDataset, writer: CaptureWriter) -> None:
    dataset.fail = True
    dataset.release.set()
    failing, params = job()
    capture = writer.for_job(failing, params)
    capture.offer(entry(0.5), jpeg(b"x"), 1)
    assert capture.summary() == {"selected": 1, "captured": 0, "capped": 0, "dropped": 1}


def test_an_image_of_a_class_the_dataset_lacks_is_dropped(
    dataset: BlockingDataset, writer: CaptureWriter
) -> None:
    dataset.release.set()
    strange, params = job()
    capture = writer.for_job(strange, params)
    other = entry(0.5)
    other["detections"][0]["class_name"] = "dog"
    capture.offer(other, jpeg(b"x"), 1)
    capture.offer(entry(0.5), jpeg(b"y"), 2)
    assert capture.summary() == {"selected": 2, "captured": 1, "capped": 0, "dropped": 1}


def test_no_writer_or_no_dataset_fails_the_job_as_invalid_input(writer: CaptureWriter) -> None:
    some, params = job()
    assert job_capture(None, some, None) is None
    with pytest.raises(InvalidJobInput, match="own lanes"):
        job_capture(None, some, params)
    gone = params.model_copy(update={"into": "gone"})
    with pytest.raises(InvalidJobInput, match="'gone'"):
        job_capture(writer, some, gone)


async def test_capture_is_refused_on_ray_lanes_before_the_dataset_is_looked_up() -> None:
    threads = anyio.CapacityLimiter(1)
    on_ray = SubmissionChecks(
        cast("ModelRegistry", None),  # not asked
        ("node-1/cuda:0",),
        (),
        DEFAULT_CLASS_NAME_LIMITS,
        InputLimits(max_files=1, max_walk_entries=1, walk_timeout_s=1.0),
        max_image_pixels=1,
        file_limiter=threads,
        walk_limiter=threads,
        no_capture=True,
    )
    await on_ray.capture_into(None, "detect")  # no capture: nothing to refuse
    with pytest.raises(InvalidJob, match="not on Ray lanes") as refused:
        await on_ray.capture_into({"into": "cams", "when": {"every_n": 1}}, "detect")
    assert refused.value.code == ErrorCode.CAPTURE_UNSUPPORTED
