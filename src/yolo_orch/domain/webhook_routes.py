"""Who wants a job's event (its own webhook, the server's endpoints by their filters), and what
they are sent: the Standard Webhooks shape, `{"type": "job.succeeded", "timestamp", "data"}`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from yolo_orch.domain import Job, JsonObject
from yolo_orch.domain.webhooks import WebhookEndpoint, WebhookEvent


@dataclass(frozen=True)
class WebhookRoutes:
    """The server's endpoints; a job brings its own webhook."""

    endpoints: tuple[WebhookEndpoint, ...] = ()

    def urls(self, job: Job, event: WebhookEvent) -> list[str]:
        """The URLs that want `event` of `job`, each once: the job's own first."""
        if job.webhook is None and not self.endpoints:
            return []
        urls = []
        if job.webhook is not None and job.webhook.wants(event):
            urls.append(job.webhook.url)
        models = (job.model, job.model_id)
        for endpoint in self.endpoints:
            if endpoint.url not in urls and endpoint.wants(str(job.kind), models, event):
                urls.append(endpoint.url)
        return urls


def webhook_payload(job: Job, event: WebhookEvent, at: datetime) -> JsonObject:
    """What receivers get of `event`: the job as the change left it, its result's summary (the
    full result is at GET /v1/jobs/{id}/result) and its progress."""
    return {
        "type": f"job.{event}",
        "timestamp": at.isoformat(),
        "data": {
            "id": job.id,
            "event": str(event),
            "kind": str(job.kind),
            "state": str(job.state),
            "model": job.model,
            "model_id": job.model_id,
            "attempt": job.attempt,
            "parent_id": job.parent_id,
            "chain_id": job.chain_id,
            "created_at": job.created_at.isoformat(),
            "started_at": _iso(job.started_at),
            "finished_at": _iso(job.finished_at),
            "error": None
            if job.error is None
            else {"code": job.error.code, "message": job.error.message},
            "result": job.result,
            "progress": None if job.progress is None else job.progress.as_dict(),
        },
    }


def _iso(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat()
