"""Each kind's typed spec reads the JSON object the jobs table has always held, and writes it back
in the same shape."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from yolo_orch.domain import SPEC_TYPES, JobKind, NewJob, spec_of
from yolo_orch.domain.specs import InferenceSpec, TrainingSpec, ValidationSpec

# As the API stored them before the specs were typed (an upload's files, a checked dataset).
STORED: dict[JobKind, dict[str, Any]] = {
    JobKind.INFERENCE: {
        "inputs": ["a.jpg", "clips/*.mp4"],
        "params": {"imgsz": 640, "conf": 0.25, "format": "auto"},
        "files": [
            {"path": "/data/a.jpg", "name": "a.jpg"},
            {"path": "/jobs/j/inputs/b.jpg", "name": "b.jpg", "refused": "too large"},
        ],
    },
    JobKind.TRAINING: {
        "dataset": "coco8/data.yaml",
        "dataset_path": "/data/coco8/data.yaml",
        "params": {"epochs": 3, "export": ["onnx"]},
    },
    JobKind.VALIDATION: {
        "split": "test",
        "dataset": "coco8/data.yaml",
        "dataset_path": "/data/coco8/data.yaml",
        "params": {"imgsz": 320},
    },
    JobKind.EXPORT: {"params": {"format": "onnx", "imgsz": 640, "half": False}},
    JobKind.STREAM: {
        "sources": [
            {"url": "rtsp://admin:secret@cam1.lan/live", "name": "rtsp://***@cam1.lan/live"},
            {"url": "/data/clips/lobby.mp4", "name": "clips/lobby.mp4"},
        ],
        "params": {"max_fps": 5.0, "imgsz": 640},
    },
    JobKind.PROMOTE: {
        "alias": "detector@production",
        "candidate": "v-1",
        "baseline": "v-2",
        "params": {"gate": {"metric": "mAP50-95", "min": 0.5, "not_worse": True}},
    },
    JobKind.TUNE: {
        "dataset": "coco8/data.yaml",
        "dataset_path": "/data/coco8/data.yaml",
        "params": {"space": {"lr0": {"low": 0.001, "high": 0.1, "log": True}}, "trials": 8},
    },
}


@pytest.mark.parametrize("kind", list(JobKind))
def test_a_stored_spec_loads_and_is_stored_again_unchanged(kind: JobKind) -> None:
    spec = spec_of(kind, STORED[kind])

    assert isinstance(spec, SPEC_TYPES[kind])
    assert spec.stored() == STORED[kind]


def test_every_kind_has_a_spec() -> None:
    assert set(SPEC_TYPES) == set(JobKind)


def test_keys_no_spec_knows_are_ignored_so_any_old_row_loads() -> None:
    # A simulated training job was stored with the empty `files` every simulated job got.
    spec = spec_of(JobKind.TRAINING, {"params": {}, "files": []})

    assert spec == TrainingSpec()
    assert spec.stored() == {"params": {}}


def test_typed_fields_are_read_from_the_stored_json() -> None:
    spec = spec_of(JobKind.INFERENCE, STORED[JobKind.INFERENCE])

    assert isinstance(spec, InferenceSpec)
    assert spec.files is not None
    assert [file.shown_name for file in spec.files] == ["a.jpg", "b.jpg"]
    assert spec.files[1].refused == "too large"


def test_a_file_without_a_name_shows_its_file_name() -> None:
    spec = InferenceSpec.model_validate({"files": [{"path": "/x/c.png"}]})

    assert spec.files is not None
    assert spec.files[0].shown_name == "c.png"


def test_a_file_entry_without_a_path_is_refused() -> None:
    with pytest.raises(ValidationError):
        spec_of(JobKind.INFERENCE, {"files": ["/abs/but/not/an/entry.jpg"]})


def test_a_job_reads_a_json_object_as_its_kinds_spec() -> None:
    new = NewJob(kind=JobKind.VALIDATION, model="sim", spec={"params": {}})

    assert new.spec == ValidationSpec(split="val")
    assert new.spec.shown() == {"dataset": None, "split": "val"}


def test_another_kinds_spec_is_read_as_this_kinds() -> None:
    spec = spec_of(JobKind.INFERENCE, {"inputs": ["a.jpg"], "params": {"imgsz": 320}})

    assert spec_of(JobKind.EXPORT, spec).stored() == {"params": {"imgsz": 320}}
