"""What the Label Studio backend (`/ls/{dataset}/...`) refuses or could not do."""

from __future__ import annotations

from yolo_orch.errors.base import YoloOrchError
from yolo_orch.errors.codes import ErrorCode


class LabelConfigInvalid(YoloOrchError):
    code = ErrorCode.LABEL_CONFIG_INVALID

    def __init__(self, why: str) -> None:
        super().__init__(f"the project's labelling config cannot be used: {why}")


class LabellingNotSet(YoloOrchError):
    code = ErrorCode.LABELLING_NOT_SET

    def __init__(self, dataset: str, setting: str) -> None:
        super().__init__(
            f"managed dataset {dataset!r} has no `labelling.{setting}`: set it when the dataset "
            "is created (POST /v1/datasets, `labelling`; see docs/label-studio.md)"
        )
        self.dataset = dataset


class PredictionFailed(YoloOrchError):
    code = ErrorCode.PREDICTION_FAILED

    def __init__(self, job_id: str, why: str) -> None:
        super().__init__(f"the inference job {job_id} of this prediction {why}")
        self.job_id = job_id


class TaskImageUnavailable(YoloOrchError):
    code = ErrorCode.TASK_IMAGE_UNAVAILABLE

    def __init__(self, task: object, why: str) -> None:
        super().__init__(f"the image of Label Studio task {task} cannot be read: {why}")
        self.task = task
