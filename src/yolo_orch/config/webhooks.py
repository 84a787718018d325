"""Settings of webhooks: how deliveries are signed, where they may go, the server's own
endpoints, and how long and how often they are tried."""

from __future__ import annotations

import base64
import binascii

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from yolo_orch.domain import JobKind
from yolo_orch.domain.webhook_hosts import WebhookHosts, check_webhook_urls
from yolo_orch.domain.webhooks import WebhookEndpoint, events_of
from yolo_orch.setting_hints import set_setting

SECRET_PREFIX = "whsec_"


class WebhookEndpointSetting(BaseModel):
    """One entry of `webhooks`: a receiver of the events of every job its filters take."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = Field(description="An http or https URL whose host webhook_allowed_hosts allows.")
    events: list[str] = Field(
        default_factory=list,
        description="Events it wants (queued, started, progress, succeeded, failed, "
        "cancelled; completed: the last three); empty: all.",
    )
    kinds: list[JobKind] = Field(default_factory=list, description="Job kinds; empty: all.")
    models: list[str] = Field(
        default_factory=list,
        description="Models as jobs name them (name, name@alias) or by id; empty: all.",
    )

    @field_validator("events", mode="after")
    @classmethod
    def _events_known(cls, value: list[str]) -> list[str]:
        events_of(value)
        return value

    def endpoint(self) -> WebhookEndpoint:
        return WebhookEndpoint(
            url=self.url,
            events=events_of(self.events),
            kinds=frozenset(str(kind) for kind in self.kinds),
            models=frozenset(self.models),
        )


class Webhooks(BaseModel):
    model_config = ConfigDict(title="Webhooks")

    webhook_secrets: list[SecretStr] = Field(
        default_factory=list,
        max_length=2,
        description="Secrets that sign every delivery (Standard Webhooks: `whsec_` and base64 "
        "of 24 to 64 random bytes). With two, each delivery carries both signatures, so a "
        "receiver holding either verifies: add the new one, move receivers to it, then drop "
        "the old. Empty: webhooks are off.",
    )
    webhooks: list[WebhookEndpointSetting] = Field(
        default_factory=list,
        description="The server's endpoints: each gets the events of the jobs its filters "
        "take (`url`, and `events`, `kinds`, `models`: all when empty), besides a job's own "
        "`webhook`.",
    )
    webhook_allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Hosts webhooks may be sent to: names as written, wildcards "
        '("*.example.com"), addresses and networks ("10.0.0.0/8"). A name is resolved at each '
        "delivery, and a private, loopback or link-local address it gives is refused unless an "
        "entry in that range lists it. Empty: none.",
    )
    webhook_retry_for_s: float = Field(
        default=86_400.0,
        ge=1,
        le=30 * 86_400,
        description="How long an event is retried (exponential backoff, full jitter), from "
        "the change that made it; then it is given up as failed.",
    )
    webhook_retry_base_s: float = Field(
        default=1.0,
        ge=0.001,
        le=3600,
        description="The first retry comes within this many seconds; each next within twice "
        "the one before, at most webhook_retry_max_s.",
    )
    webhook_retry_max_s: float = Field(
        default=3600.0,
        ge=0.001,
        le=86_400,
        description="The longest wait between two tries of an event.",
    )
    webhook_progress_every_s: float = Field(
        default=5.0,
        ge=0,
        le=3600,
        description="At most one progress event per job in this many seconds; 0: every one.",
    )
    webhook_timeout_s: float = Field(
        default=10.0, gt=0, le=300, description="Seconds one delivery request may take."
    )
    webhook_concurrency: int = Field(
        default=32,
        ge=1,
        le=1024,
        description="Deliveries in flight at once (and connections held to receivers).",
    )

    @field_validator("webhook_secrets", mode="after")
    @classmethod
    def _secrets_usable(cls, value: list[SecretStr]) -> list[SecretStr]:
        fix = set_setting("webhook_secrets", '["whsec_<base64 of 32 random bytes>"]')
        for secret in value:
            if not _decodes(secret.get_secret_value()):
                raise ValueError(
                    "webhook_secrets: each secret is `whsec_` and the base64 of 24 to 64 bytes "
                    f"(python -c \"import base64, os; print('whsec_' + "
                    f'base64.b64encode(os.urandom(32)).decode())"): {fix}'
                )
        return value

    @field_validator("webhook_allowed_hosts", mode="after")
    @classmethod
    def _hosts_understood(cls, value: list[str]) -> list[str]:
        WebhookHosts(tuple(value))
        return value

    @model_validator(mode="after")
    def _webhooks_signed_and_allowed(self) -> Webhooks:
        if (self.webhooks or self.webhook_allowed_hosts) and not self.webhook_secrets:
            raise ValueError(
                "webhooks are configured (webhooks or webhook_allowed_hosts) but "
                "webhook_secrets is empty: every delivery is signed, "
                + set_setting("webhook_secrets", '["whsec_<base64 of 32 random bytes>"]')
            )
        check_webhook_urls([hook.url for hook in self.webhooks], self.webhook_hosts())
        return self

    def webhook_hosts(self) -> WebhookHosts:
        return WebhookHosts(tuple(self.webhook_allowed_hosts))

    def webhook_endpoints(self) -> tuple[WebhookEndpoint, ...]:
        return tuple(hook.endpoint() for hook in self.webhooks)

    def webhook_signing_secrets(self) -> tuple[str, ...]:
        return tuple(secret.get_secret_value() for secret in self.webhook_secrets)


def _decodes(secret: str) -> bool:
    if not secret.startswith(SECRET_PREFIX):
        return False
    try:
        raw = base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
    except (binascii.Error, ValueError):
        return False
    return 24 <= len(raw) <= 64
