"""Server-sent events as tests read them."""

from __future__ import annotations

import json
from typing import Any


def parse_sse(text: str) -> list[dict[str, Any]]:
    """Each event of a `text/event-stream` body: its fields, `data` decoded from JSON; comments
    (keep-alives) left out."""
    events = []
    for block in text.strip().split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in block.splitlines() if not line.startswith(":")
        )
        if fields:
            events.append({**fields, "data": json.loads(fields["data"])})
    return events
