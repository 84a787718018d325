"""Settings of the server itself: where it keeps its data, how it listens, whom it lets in,
what it reads of its GPUs."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Scope(enum.StrEnum):
    JOBS = "jobs"
    """Submit, read and cancel jobs; read models and devices."""
    MODELS_WRITE = "models:write"
    """What `jobs` may, and moving and deleting model aliases (`name@alias`)."""
    LABELLING = "labelling"
    """Label Studio's: the ML backend under /ls/, reading managed datasets and syncing them
    with Label Studio (push, pull), nothing else."""
    ADMIN = "admin"
    """Everything: also importing and deleting models and variants, and deleting jobs."""


class Token(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="SHA-256 of the token, in hex.")
    scope: Scope = Scope.JOBS
    name: str = Field(default="", description="Whose token this is, for people reading the file.")


class ServerAndStorage(BaseModel):
    model_config = ConfigDict(title="Server and storage")

    data_dir: Path = Field(
        default=Path("./var"), description="Database, job files and the instance lock."
    )
    database_url: str = Field(
        default="",
        description='Empty: SQLite at {data_dir}/yolo-orch.db. "sqlite+aiosqlite:///PATH": SQLite '
        'elsewhere. "postgresql+psycopg://USER:PASSWORD@HOST:PORT/DATABASE": PostgreSQL (create '
        "the database with createdb --locale=C --template=template0; the schema is migrated "
        'at start-up). "memory://" keeps jobs in memory only (tests and demos: nothing '
        "survives a restart).",
    )
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_format: Literal["text", "json"] = Field(
        default="text", description="json: one JSON object per line, with the job id."
    )


class RequestsAndConnections(BaseModel):
    model_config = ConfigDict(title="Requests and connections")

    request_file_threads: int = Field(
        default=16,
        ge=1,
        description="Threads for the file work of requests (inputs, datasets, imports, "
        "uploads, results), apart from the jobs' threads.",
    )
    request_walk_threads: int = Field(
        default=4,
        ge=1,
        description="Threads for expanding the globs of submissions, apart from the other file "
        "work of requests: a flood of costly walks queues here, not in front of cheap requests.",
    )
    max_wait_s: float = Field(
        default=60.0,
        ge=0,
        le=3600,
        description="Longest wait a `Prefer: wait=N` request may ask for (RFC 7240); 0 turns "
        "waiting off.",
    )
    max_request_bytes: int = Field(
        default=1 << 20,
        ge=1024,
        description="Largest request body on every route but the uploads (413 beyond).",
    )
    max_upload_bytes: int = Field(
        default=1 << 30,
        ge=1024,
        description="Largest body on the upload routes: images of one job, weights, a variant.",
    )
    max_discard_bytes: int = Field(
        default=1 << 30,
        ge=0,
        description="Bytes of a body refused as too large that are read and dropped so that "
        "the client gets the 413 rather than a reset connection.",
    )
    max_header_bytes: int = Field(
        default=16 * 1024,
        ge=1024,
        description="Largest request line and headers (431 beyond).",
    )
    header_timeout_s: float = Field(
        default=30.0,
        gt=0,
        le=3600,
        description="Seconds a request line and headers may take to arrive, from the connection's "
        "opening or the request's first byte (408 and the connection closed beyond).",
    )
    body_idle_timeout_s: float = Field(
        default=30.0,
        gt=0,
        le=3600,
        description="Seconds a request body may go without a byte arriving (408 and the "
        "connection closed beyond; what it had uploaded is removed).",
    )
    max_connections: int | None = Field(
        default=None,
        ge=1,
        description="Open client connections at most; at the cap a new one takes the place of "
        "the quietest idle one, held wait or stalled body, else gets 503. Empty: the "
        "descriptor limit less a reserve for the database, logs, models and jobs (a quarter, "
        "at least 256) and the 96 places of connections pending or leaving.",
    )
    max_held_requests: int = Field(
        default=1024,
        ge=1,
        description="Requests holding their answer at once (Prefer waits, event streams); past "
        "it the oldest is answered now (a wait with the job as it is; a stream ends).",
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Names (Host header) the server answers to besides its bind address, "
        'localhost, 127.0.0.1 and [::1]: the names clients use to reach it; "*": any (421 '
        "host_not_allowed otherwise, a guard against DNS rebinding).",
    )
    allowed_origins: list[str] = Field(
        default_factory=list,
        description="Origins (scheme://host:port) of other sites whose pages may send POST, PUT "
        "and DELETE requests (and read the answers: CORS); any other site's are refused (403 "
        "cross_origin).",
    )


class Security(BaseModel):
    model_config = ConfigDict(title="Security")

    tokens: list[Token] = Field(
        default_factory=list,
        description="Bearer tokens (hashes); once one is set, every path needs one but the probes, "
        "the dashboard and what metrics_public / docs_require_token open. None: no "
        "authentication.",
    )
    allow_unauthenticated: bool = Field(
        default=False,
        description="Allow serving on a non-loopback address without tokens.",
    )
    metrics_public: bool = Field(
        default=False, description="Serve /metrics without a token even when tokens are set."
    )
    docs_require_token: bool = Field(
        default=False,
        description="With tokens set, /docs, /redoc and /openapi.json need one too.",
    )


class Telemetry(BaseModel):
    model_config = ConfigDict(title="Telemetry")

    gpu_telemetry: bool = Field(
        default=True,
        description="NVML readings in /v1/devices and /metrics, and GPU health checks.",
    )
    gpu_health_interval_s: float = Field(
        default=30.0, gt=0, description="How often each GPU's health is read from NVML."
    )
    telemetry_history_interval_s: float = Field(
        default=5.0, gt=0, description="How often the dashboard's GPU history is sampled."
    )
    telemetry_history_samples: int = Field(
        default=120, ge=1, le=10_000, description="Samples kept per GPU (in memory only)."
    )
