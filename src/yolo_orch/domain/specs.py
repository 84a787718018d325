"""What each kind of job holds besides its model: its typed spec, stored as the JSON object it
dumps to (`stored`). The shape of that object is the one the jobs table has always held, so rows
written before these classes load as they are. Params stay a JSON object here: each kind's params
model (`yolo_orch.params`, named by the kind's module in `yolo_orch.kinds`) reads them."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class SpecBase(BaseModel):
    # Keys no spec knows are ignored, not refused: a row must load whatever wrote it.
    model_config = ConfigDict(frozen=True, extra="ignore")

    params: dict[str, Any] = Field(default_factory=dict)
    """As the request's params model dumped them (defaults filled in, unset options left out)."""

    def stored(self) -> dict[str, Any]:
        """The JSON object the store keeps."""
        return self.model_dump(mode="json", exclude_none=True)

    def shown(self) -> dict[str, Any]:
        """What a client sees of the spec besides its params (`inputs`, `dataset`, `split`)."""
        return {}


class ResolvedFile(BaseModel):
    """One input of an inference job, as the server resolved (or saved) it at submission."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    path: str
    """Absolute: under a data root, or the job's uploads folder."""
    name: str | None = None
    """What the client called it; the result reports this, never a server path."""
    refused: str | None = None
    """Why it is not read at all: the server, which read it for a Ray node, refused it."""

    def stored(self) -> dict[str, Any]:
        """As the spec's `files` entry keeps it: `{"path", "name"}`, and `refused` if set."""
        return self.model_dump(exclude_none=True)

    @property
    def shown_name(self) -> str:
        return self.name if self.name is not None else Path(self.path).name


class InferenceSpec(SpecBase):
    inputs: list[str] = Field(default_factory=list)
    """As the client gave them: paths relative to a data root (globs allowed), or upload names."""
    files: list[ResolvedFile] | None = None
    """The inputs resolved at submission, in order; what the runner reads."""

    def shown(self) -> dict[str, Any]:
        return {"inputs": self.inputs}


class DatasetSpec(SpecBase):
    dataset: str | None = None
    """As the client named it (not needed by the simulated model)."""
    dataset_path: str | None = None
    """The dataset's absolute path, checked at submission; what the runner reads."""

    def shown(self) -> dict[str, Any]:
        return {"dataset": self.dataset}


class TrainingSpec(DatasetSpec):
    pass


class ValidationSpec(DatasetSpec):
    split: Literal["val", "test"] = "val"

    def shown(self) -> dict[str, Any]:
        return {**super().shown(), "split": self.split}


class ExportSpec(DatasetSpec):
    """`dataset`: int8 only, the calibration images."""


class StreamSource(BaseModel):
    """One live source of a stream job."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    url: str
    """What the runner opens: the URL as given, credentials and all, or a local video's
    absolute path (resolved at submission). Never shown, returned or logged."""
    name: str
    """What clients, logs and the dashboard see: the URL with its credentials redacted
    (`domain.streams.redacted`), or the video as the client named it."""


class StreamSpec(SpecBase):
    sources: list[StreamSource] = Field(default_factory=list)

    def shown(self) -> dict[str, Any]:
        return {"sources": [source.name for source in self.sources]}


class PromoteSpec(SpecBase):
    """A chain's last step: move `alias` (`name@alias`) to the model the job runs, if the gate
    (`params.gate`) passes on the validation `candidate` (and the alias's current model's,
    `baseline`)."""

    alias: str
    candidate: str | None = None
    """The validation job that scored the model to promote."""
    baseline: str | None = None
    """The validation job that scored the alias's current model on the same split."""

    def shown(self) -> dict[str, Any]:
        return {"alias": self.alias}


class TuneSpec(DatasetSpec):
    """A search over training params: each trial a training job of its own on `dataset`
    (`params`: the search, `yolo_orch.params.tune`)."""


JobSpec = (
    InferenceSpec | TrainingSpec | ValidationSpec | ExportSpec | StreamSpec | PromoteSpec | TuneSpec
)
