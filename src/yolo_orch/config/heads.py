"""Settings of the heads on one PostgreSQL database: one active, the others standing by."""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from yolo_orch.setting_hints import set_setting


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
        "active, http:// or https:// with a host; empty: http://HOST:PORT of this server's own "
        "`host` and `port`.",
    )

    @field_validator("head_url", mode="after")
    @classmethod
    def _head_url_absolute(cls, value: str) -> str:
        """Clients follow it from the other heads' 307s: a relative one would send them round
        in a loop on the standby."""
        parts = urlsplit(value)
        if value and (parts.scheme not in ("http", "https") or not parts.hostname):
            raise ValueError(
                f"head_url {value!r} is not an http:// or https:// URL with a host: "
                + set_setting("head_url", "http://head-1.example:8000")
            )
        return value
