"""Settings of the heads on one PostgreSQL database: one active, the others standing by."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Heads(BaseModel):
    model_config = ConfigDict(title="Active and standby heads")

    head_lease_timeout_s: float = Field(
        default=5.0,
        ge=1,
        le=60,
        description="On PostgreSQL: how long the active head's lease lasts without a renewal. "
        "A standby takes over at once when the active's process dies (its database session "
        "ends), and at the latest this long after the active stopped renewing (host lost, "
        "process hung); an active that cannot renew for this long exits.",
    )
    head_url: str = Field(
        default="",
        description="On PostgreSQL: the URL other heads send clients to (307) while this one is "
        "active; empty: http://HOST:PORT of this server's own `host` and `port`.",
    )
