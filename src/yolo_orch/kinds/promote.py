"""Promotion: move an alias (`name@alias`) to a model if a validation of it passes a gate. A
training's chain (`then.promote`) makes one; a client may submit one too, naming the
validation job(s) that scored the model. It runs on the server, taking no lane."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from yolo_orch.domain import JobKind
from yolo_orch.domain.aliases import ALIAS_REF_PATTERN
from yolo_orch.domain.results import PromoteResultDetail
from yolo_orch.domain.specs import PromoteSpec
from yolo_orch.errors import ErrorCode, InvalidJob
from yolo_orch.kinds.base import JobRequest, Kind
from yolo_orch.kinds.submission import Submission, SubmissionChecks
from yolo_orch.params.chains import PromoteParams


class PromoteJobCreate(JobRequest):
    kind: Literal["promote"]
    model: str = Field(min_length=1, max_length=200, description="The model to promote.")
    alias: str = Field(pattern=ALIAS_REF_PATTERN, max_length=264, description="`name@alias`.")
    candidate: str | None = Field(
        default=None,
        max_length=64,
        description="The validation job that scored `model` (needed by a gate).",
    )
    baseline: str | None = Field(
        default=None,
        max_length=64,
        description="The validation job that scored the alias's current model (`not_worse`).",
    )
    params: PromoteParams = Field(default_factory=PromoteParams)

    def spec(self) -> PromoteSpec:
        return PromoteSpec(
            alias=self.alias,
            candidate=self.candidate,
            baseline=self.baseline,
            params=self.params.model_dump(mode="json", exclude_none=True),
        )


async def _checked(submission: Submission[PromoteSpec], checks: SubmissionChecks) -> PromoteSpec:
    """Only a registry model can be an alias's target; a gate needs a scored candidate."""
    spec = submission.spec
    if submission.model is None and not submission.deferred:
        raise InvalidJob(
            f"{submission.model_name!r} is not a registry model: an alias cannot point to it",
            code=ErrorCode.INVALID_INPUT,
        )
    if spec.params.get("gate") is not None and spec.candidate is None:
        raise InvalidJob(
            "a gate needs `candidate`: the validation job that scored the model",
            code=ErrorCode.INVALID_INPUT,
        )
    return spec


PROMOTE = Kind(
    name=JobKind.PROMOTE,
    params=PromoteParams,
    request=PromoteJobCreate,
    result=PromoteResultDetail,
    checked=_checked,
    on_head=True,
)
