"""The managed datasets' request and response models (`/v1/datasets`): pydantic only, so that the
client reads the server's answers with the server's own models."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from yolo_orch.domain.managed_datasets import (
    DATASET_NAME_MAX_LENGTH,
    DATASET_NAME_PATTERN,
    DATASET_REF_PREFIX,
    IMAGE_KEY,
    DatasetInfo,
)

DatasetName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=DATASET_NAME_MAX_LENGTH,
        pattern=DATASET_NAME_PATTERN,
        description="a-z, 0-9, `_` and `-`, starting with a letter or digit, up to 64.",
    ),
]


class DatasetCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: DatasetName
    task: Literal["detect", "segment", "pose", "obb", "classify"]
    names: list[Annotated[str, Field(min_length=1, max_length=1000)]] = Field(
        min_length=1,
        max_length=10_000,
        description="The class names, in class id order; classify's are folder names too.",
    )
    kpt_shape: tuple[Annotated[int, Field(ge=1, le=1000)], Literal[2, 3]] | None = Field(
        default=None,
        description="Pose only (and required there): keypoints per object, and 2 (x, y) or 3 "
        "(x, y, visibility) values each.",
    )
    labelling: dict[str, Any] | None = Field(
        default=None,
        description="What the Label Studio backend reads: the model to predict with "
        "(`model`: a name, id or `name@alias`), the alias to promote, `train_after`, training "
        "params (docs/label-studio.md).",
    )


class SplitCountsPublic(BaseModel):
    images: int
    instances: dict[str, int] = Field(
        description="Per class name: its objects (label lines), or for classify its images; "
        "classes with none are left out."
    )


class DatasetPublic(BaseModel):
    name: str
    task: str
    names: list[str]
    kpt_shape: tuple[int, int] | None
    created_at: datetime
    items: int
    splits: dict[str, SplitCountsPublic] = Field(description="`train` and `val`.")
    sources: dict[str, int] = Field(
        description="Items by where their labels come from: `model` (predicted, not checked by "
        "a person) and `annotation` (a person's, from Label Studio)."
    )
    labelling: dict[str, Any]
    data: str = Field(
        description='What a training or validation job names as its `dataset`: "dataset:<name>".'
    )

    @classmethod
    def of(cls, info: DatasetInfo) -> DatasetPublic:
        return cls(
            name=info.name,
            task=info.task,
            names=list(info.names),
            kpt_shape=info.kpt_shape,
            created_at=info.created_at,
            items=info.items,
            splits={
                split: SplitCountsPublic(images=counts.images, instances=counts.instances)
                for split, counts in info.splits.items()
            },
            sources=info.sources,
            labelling={key: value for key, value in info.labelling.items() if key != IMAGE_KEY},
            data=f"{DATASET_REF_PREFIX}{info.name}",
        )


class DatasetList(BaseModel):
    datasets: list[DatasetPublic]
