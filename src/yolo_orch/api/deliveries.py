"""GET /v1/jobs/{id}/deliveries: the webhook events a job made, each with its tries."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Path
from pydantic import BaseModel, Field

from yolo_orch.api.deps import ServicesDep
from yolo_orch.api.problems import problem_responses
from yolo_orch.domain.streams import redacted
from yolo_orch.domain.webhooks import Delivery, DeliveryAttempt, DeliveryState, WebhookEvent

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


class AttemptPublic(BaseModel):
    at: datetime
    status_code: int | None = Field(description="The receiver's answer; null when none came.")
    latency_ms: float
    error: str | None = Field(description="Why the try failed; null for a 2xx answer.")

    @classmethod
    def of(cls, attempt: DeliveryAttempt) -> AttemptPublic:
        return cls(
            at=attempt.at,
            status_code=attempt.status_code,
            latency_ms=round(attempt.latency_ms, 3),
            error=attempt.error,
        )


class DeliveryPublic(BaseModel):
    id: str = Field(description="The `webhook-id` header: the same on every try.")
    url: str = Field(description="Where it goes, with any password or token in it redacted.")
    event: WebhookEvent
    state: DeliveryState = Field(
        description="pending (tried again at `next_at`), delivered, or failed (given up after "
        "webhook_retry_for_s)."
    )
    created_at: datetime
    next_at: datetime | None
    attempts: list[AttemptPublic]

    @classmethod
    def of(cls, delivery: Delivery) -> DeliveryPublic:
        return cls(
            id=delivery.id,
            url=redacted(delivery.url),
            event=delivery.event,
            state=delivery.state,
            created_at=delivery.created_at,
            next_at=delivery.next_at,
            attempts=[AttemptPublic.of(attempt) for attempt in delivery.attempts],
        )


class DeliveryList(BaseModel):
    deliveries: list[DeliveryPublic]


@router.get(
    "/{job_id}/deliveries",
    response_model=DeliveryList,
    summary="List a job's webhook deliveries",
    description="Each webhook event of the job, for each URL that wanted it, in order, with "
    "every try: when, the answer's status code, the latency and the error. Empty when the "
    "server sends no webhooks.",
    responses=problem_responses(404),
)
async def list_deliveries(
    services: ServicesDep,
    job_id: Annotated[str, Path(description="The job's id.", max_length=64)],
) -> DeliveryList:
    await services.store.get(job_id)  # raises JobNotFound: 404
    outbox = services.webhook_outbox
    found = [] if outbox is None else await outbox.deliveries(job_id)
    return DeliveryList(deliveries=[DeliveryPublic.of(delivery) for delivery in found])
