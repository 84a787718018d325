"""The webhook outbox of the in-memory store: events kept as the store's change is made (the
memory store's transaction is a method that does not await), lost at a restart like its jobs."""

from __future__ import annotations

import bisect
from collections import defaultdict
from typing import Any

from yolo_orch.domain.webhooks import Delivery, DeliveryAttempt, DeliveryState, OutboxEvent, Settled
from yolo_orch.store.outbox import WebhookOutbox, delivery, outbox_event


class MemoryOutbox(WebhookOutbox):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._rows: list[dict[str, Any]] = []
        """Every event kept, in `seq` order."""
        self._by_id: dict[str, dict[str, Any]] = {}
        self._attempts: dict[str, list[DeliveryAttempt]] = defaultdict(list)
        self._last_seq = 0

    def _keep(self, tx: Any, events: list[dict[str, Any]]) -> None:
        for event in events:
            self._last_seq += 1
            row = {**event, "seq": self._last_seq}
            self._rows.append(row)
            self._by_id[row["id"]] = row

    async def pending(self, after_seq: int, limit: int) -> list[OutboxEvent]:
        start = bisect.bisect_right(self._rows, after_seq, key=lambda row: row["seq"])
        found: list[OutboxEvent] = []
        for row in self._rows[start:]:
            if len(found) == limit:
                break
            if row["state"] == DeliveryState.PENDING:
                found.append(outbox_event(row))
        return found

    async def settle(self, settled: list[Settled]) -> None:
        for each in settled:
            row = self._by_id[each.attempt.event_id]
            row.update(state=str(each.state), attempts=each.attempts, next_at=each.next_at)
            self._attempts[row["job_id"]].append(each.attempt)

    async def deliveries(self, job_id: str) -> list[Delivery]:
        tries: dict[str, list[DeliveryAttempt]] = defaultdict(list)
        for attempt in self._attempts.get(job_id, []):
            tries[attempt.event_id].append(attempt)
        return [delivery(row, tries[row["id"]]) for row in self._rows if row["job_id"] == job_id]
