"""A managed dataset's labelling settings (its manifest's `labelling`): what the Label Studio
backend predicts with, what it trains, when, and which alias a good training moves. The backend
also keeps its own counters in that object; they are not settings and are not read here."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from yolo_orch.domain.aliases import ALIAS_REF_PATTERN
from yolo_orch.params.chains import GateParams


class LabellingParams(BaseModel):
    # Other keys of the manifest's `labelling` (counters, sync records) are not settings.
    model_config = ConfigDict(extra="ignore", frozen=True)

    model: str | None = Field(
        default=None,
        min_length=1,
        max_length=264,
        description="The model that pre-annotates tasks: a registry name or id, or "
        "`name@alias` (`detector@production`): each prediction runs the alias's model then.",
    )
    alias: str | None = Field(
        default=None,
        pattern=ALIAS_REF_PATTERN,
        max_length=264,
        description="`name@alias` a training chain moves to the trained model when the gate "
        "passes; default: `model` when it is an alias. None: the chain validates, moves nothing.",
    )
    train_after: int | None = Field(
        default=None,
        ge=1,
        le=1_000_000,
        description="Start a training chain once this many annotations were created since the "
        "last one started; None: only Label Studio's Start training or POST /ls/{dataset}/train.",
    )
    train_from: str | None = Field(
        default=None,
        min_length=1,
        max_length=264,
        description="The model a training starts from; default: `model`.",
    )
    train: dict[str, Any] = Field(
        default_factory=dict,
        description="Training params (as POST /v1/jobs `params` of a training); checked when a "
        "chain is submitted.",
    )
    predict: dict[str, Any] = Field(
        default_factory=dict,
        description="Inference params of the predictions (`conf`, `imgsz`, ...); checked when "
        "a prediction is asked for.",
    )
    gate: GateParams | None = Field(
        default=None, description="What the trained model must score to be promoted."
    )

    def promoted_alias(self) -> str | None:
        if self.alias is not None:
            return self.alias
        if self.model is not None and "@" in self.model:
            return self.model
        return None
