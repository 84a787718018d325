"""What every kind's parameters share: strictness, the time limit, the simulated runtime's knobs,
and the one way a runner reads a job's stored params."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from yolo_orch.domain import JsonObject
from yolo_orch.errors import InvalidJobInput

IMGSZ_MIN, IMGSZ_MAX = 32, 4096
"""The image sizes any job (and an imported variant) may have: 32 is the largest stride of a
YOLO model; past 4096 one image is 200 MB of activations per layer."""
EXPORT_BATCH_MAX = 1024
"""The largest batch an exported (or imported) static variant is built for: each call pads to it."""

MAX_CLASS_ID = 2**31 - 1
"""Class ids past this cannot be any model's (and overflow the int64 tensors they become)."""


class StrictParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @classmethod
    def from_job(cls, params: JsonObject) -> Self:
        """A job's stored params as the runner reads them: the same checks as at submission,
        strictly, since what was stored is what the submission's validation produced."""
        try:
            return cls.model_validate(params, strict=True)
        except ValidationError as e:
            problems = "; ".join(
                f"params.{'.'.join(str(part) for part in error['loc'])}: {error['msg']}"
                for error in e.errors()
            )
            raise InvalidJobInput(problems) from None


MAX_TIMEOUT_S = 30 * 24 * 3600


class JobParams(StrictParams):
    """What every kind's params hold."""

    timeout_s: float | None = Field(
        default=None,
        ge=0,
        le=MAX_TIMEOUT_S,
        description="Seconds the job may run before it is stopped and fails `timeout`; 0: no "
        "limit; unset: the server's `timeout_s` for its kind.",
    )


class SimulatedParams(JobParams):
    """The `sim_*` params are honoured by the simulated runtime only: with any model but `sim`
    they are refused (422 `invalid_request`: "apply to model 'sim' only")."""

    sim_seconds: float | None = Field(
        default=None,
        ge=0,
        le=3600,
        description="Simulated, model `sim` only (422 with any other): run time (default 0.2).",
    )
    sim_steps: int | None = Field(
        default=None,
        ge=1,
        le=10_000,
        description="Simulated, model `sim` only: progress steps (default 5).",
    )
    sim_fail: Literal["error", "oom", "cuda_fatal", "crash"] | None = Field(
        default=None,
        description='Simulated, model `sim` only: "error" raises, "oom" raises CUDA out of '
        'memory, "cuda_fatal" raises a sticky CUDA error (the server then exits to be '
        'restarted), "crash" kills the server process.',
    )
    sim_oom_above: int | None = Field(
        default=None,
        ge=1,
        le=10_000,
        description="Simulated, model `sim` only: a forward pass of more than this many images "
        "raises CUDA out of memory (a shared batch is then split and retried).",
    )


SIM_FIELDS = ("sim_seconds", "sim_steps", "sim_fail", "sim_oom_above")
