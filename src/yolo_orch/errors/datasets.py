"""What refuses a lookup or a change of a managed dataset (`/v1/datasets`)."""

from __future__ import annotations

from yolo_orch.errors.base import YoloOrchError
from yolo_orch.errors.codes import ErrorCode


class DatasetNotFound(YoloOrchError):
    code = ErrorCode.DATASET_NOT_FOUND

    def __init__(self, name: str) -> None:
        super().__init__(f"no managed dataset named {name!r}: see GET /v1/datasets")
        self.name = name


class DatasetExists(YoloOrchError):
    code = ErrorCode.DATASET_EXISTS

    def __init__(self, name: str) -> None:
        super().__init__(
            f"the dataset name {name!r} is taken: a managed dataset, or a folder, of that name "
            "is in the datasets folder"
        )
        self.name = name


class DatasetItemNotFound(YoloOrchError):
    code = ErrorCode.DATASET_ITEM_NOT_FOUND

    def __init__(self, name: str, item: str) -> None:
        super().__init__(f"managed dataset {name!r} has no item {item!r}")
        self.name = name
        self.item = item


class InvalidDatasetItem(YoloOrchError):
    """An item's image or labels that the dataset cannot hold (a label line of another task's
    shape, a class id out of range, an image suffix ultralytics does not read)."""

    code = ErrorCode.INVALID_DATASET_ITEM

    def __init__(self, name: str, why: str) -> None:
        super().__init__(f"managed dataset {name!r} cannot hold this item: {why}")
        self.name = name
