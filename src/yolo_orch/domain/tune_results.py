"""The shape of a tune job's result (GET /v1/jobs/{id}/result): its trials and the best."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

TrialState = Literal["complete", "pruned", "failed", "cancelled"]
"""`cancelled`: a trial's training cancelled by someone else than the tune's pruner."""


class TuneTrial(BaseModel):
    model_config = ConfigDict(extra="forbid")

    number: int = Field(description="0, 1, ... in the order the trials were submitted.")
    job_id: str = Field(description="The trial's training job (a child of the tune job).")
    params: dict[str, Any] = Field(description="The searched params the trial trained with.")
    value: float | None = Field(
        description="The objective: the training's final score (complete), or its last "
        "epoch's (pruned); null for a failed or cancelled trial."
    )
    state: TrialState
    pruned_at_epoch: int | None = Field(description="The epoch after which it was pruned.")
    model_id: str | None = Field(
        description="The model its training registered (null: none, or the simulated runtime)."
    )


class TuneResultDetail(BaseModel):
    model_config = ConfigDict(extra="forbid")

    objective: str = Field(description="The validation score maximized (`params.objective`).")
    trials: list[TuneTrial]
    best: TuneTrial | None = Field(description="The complete trial of the highest value.")
