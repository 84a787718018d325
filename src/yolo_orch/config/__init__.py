"""Settings: embedded defaults < TOML file < `YOLO_ORCH_*` environment < explicit overrides.

This is the only module that reads the environment or configuration files.
"""

from __future__ import annotations

import enum
import ipaddress
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from yolo_orch.files.class_names import DEFAULT_MAX_CLASS_NAMES, DEFAULT_MAX_CLASS_NAMES_BYTES
from yolo_orch.files.images import DEFAULT_MAX_IMAGE_PIXELS
from yolo_orch.files.resultfile import DEFAULT_INLINE_RESULT_BYTES, DEFAULT_MAX_RESULT_BYTES
from yolo_orch.files.shown_paths import ShownPaths
from yolo_orch.params.common import MAX_TIMEOUT_S
from yolo_orch.setting_hints import ENV_PREFIX, set_setting

CONFIG_ENV_VAR = "YOLO_ORCH_CONFIG"
MEMORY_DATABASE_URL = "memory://"
SQLITE_URL_PREFIX = "sqlite+aiosqlite:///"


class Scope(enum.StrEnum):
    JOBS = "jobs"
    """Submit, read and cancel jobs; read models and devices."""
    ADMIN = "admin"
    """Everything: also importing and deleting models and variants, and deleting jobs."""


class Token(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="SHA-256 of the token, in hex.")
    scope: Scope = Scope.JOBS
    name: str = Field(default="", description="Whose token this is, for people reading the file.")


KindName = Literal["inference", "training", "validation", "export"]
LaneKind = Literal["cpu", "cuda", "sim"]
_DEFAULT_BATCH_MAX_IMAGES: dict[LaneKind, int] = {"cpu": 8, "cuda": 32, "sim": 1}
_DEFAULT_TIMEOUTS_S: dict[KindName, float] = {
    "inference": 3600,
    "training": 0,  # a training run may take days: no limit unless a job sets one
    "validation": 3600,
    "export": 0,  # a TensorRT engine build can take long without a progress report
}


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
    )

    data_dir: Path = Field(
        default=Path("./var"), description="Database, job files and the instance lock."
    )
    database_url: str = Field(
        default="",
        description='Empty: SQLite at {data_dir}/yolo-orch.db. "memory://" keeps jobs in memory '
        "only (tests and demos: nothing survives a restart).",
    )
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    runtime: Literal["auto", "simulated"] = Field(
        default="auto",
        description='"auto": ultralytics on the GPUs this host has (else its CPU); "simulated": '
        "fake jobs on `sim_lanes` lanes.",
    )
    lanes: list[str] = Field(
        default_factory=list, description="Explicit lane list (cuda:0, cpu, ...); empty = detect."
    )
    slots_per_lane: int = Field(default=1, ge=1, description="Jobs that may share one lane.")
    sim_lanes: int = Field(default=2, ge=1, le=64, description="Lanes of the simulated runtime.")
    batch_max_images: dict[LaneKind, Annotated[int, Field(ge=1, le=1024)]] = Field(
        default_factory=lambda: dict(_DEFAULT_BATCH_MAX_IMAGES),
        description="Images one forward pass may hold, by lane kind: queued inference jobs of "
        "one model and forward-pass params share a pass up to this; 1: no batching. A kind left "
        "out keeps its default.",
    )
    batch_window_ms: float = Field(
        default=0.0,
        ge=0,
        le=10_000,
        description="How long a lane with room in its batch waits for more jobs to join; 0: "
        "only jobs already queued join.",
    )
    decode_ahead_mb: int = Field(
        default=256,
        ge=0,
        le=1 << 20,
        description="Memory (MiB) for uploaded images decoded while their jobs wait, so that a "
        "lane finds their pixels ready; 0: a lane decodes its jobs' images itself.",
    )
    heap_retain_mb: int = Field(
        default=64,
        ge=0,
        le=4096,
        description="Freed memory (MiB) the server's heap keeps (glibc: one arena, blocks under "
        "half of it, at most 32 MiB, from the heap), so that a forward pass on the CPU reuses "
        "what the last one freed instead of faulting it in again; 0: glibc's defaults.",
    )
    max_queued: int = Field(default=1000, ge=1, description="Queued jobs allowed before 429.")
    max_attempts: int = Field(
        default=3, ge=1, description="Runs a job gets before a crash fails it as `interrupted`."
    )
    shutdown_grace_s: float = Field(
        default=30.0, ge=0, description="Time running jobs get to finish on SIGTERM."
    )
    timeout_s: dict[KindName, float] = Field(
        default_factory=lambda: dict(_DEFAULT_TIMEOUTS_S),
        description="Each kind's time limit in seconds when a job's `params.timeout_s` sets "
        "none; 0: none. A job past it fails `timeout`. A kind left out keeps its default.",
    )
    stall_after_s: float = Field(
        default=3600.0,
        ge=0,
        description="A running job whose progress has not moved this long fails `stalled`; 0: off.",
    )
    wedge_grace_s: float = Field(
        default=60.0,
        gt=0,
        description="Time a stopped job's thread gets to return before its lanes are wedged and "
        "the server restarts (exit 76) once the other jobs end.",
    )
    priority_aging_per_minute: float = Field(
        default=1.0,
        ge=0,
        le=1000,
        description="Priority a queued job gains per minute waited, so none waits forever; 0: off.",
    )
    data_roots: list[Path] = Field(
        default_factory=list, description="Folders whose files jobs may read (images, datasets)."
    )
    model_roots: list[Path] = Field(
        default_factory=list,
        description="Folders whose .pt weights and exported variants may be imported by path.",
    )
    model_cache_size: int = Field(
        default=2, ge=0, description="Loaded models each lane keeps warm (LRU)."
    )
    cpu_threads: int | None = Field(
        default=None,
        ge=1,
        description="torch threads of a job on the cpu lane (set in its worker thread); empty: "
        "the runners' default. CUDA lanes use 1.",
    )
    max_files_per_job: int = Field(default=1000, ge=1, description="Images one job may name.")
    max_walk_entries: int = Field(
        default=100_000,
        ge=1,
        description="Directory entries resolving one submission's inputs may visit "
        "(422 input_walk_too_large beyond).",
    )
    input_walk_timeout_s: float = Field(
        default=5.0,
        gt=0,
        description="Seconds resolving one submission's inputs may take "
        "(422 input_walk_too_large beyond).",
    )
    request_file_threads: int = Field(
        default=16,
        ge=1,
        description="Threads for the file work of requests (inputs, datasets, imports, "
        "uploads, results), apart from the jobs' threads.",
    )
    max_wait_s: float = Field(
        default=60.0,
        ge=0,
        le=3600,
        description="Longest wait a `Prefer: wait=N` request may ask for (RFC 7240); 0 turns "
        "waiting off.",
    )
    request_walk_threads: int = Field(
        default=4,
        ge=1,
        description="Threads for expanding the globs of submissions, apart from the other file "
        "work of requests: a flood of costly walks queues here, not in front of cheap requests.",
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
    max_concurrent_imports: int = Field(
        default=2,
        ge=1,
        description="Imports of models and variants (uploads and paths together) under way at "
        "once; another is refused before its body is read (429 imports_busy, Retry-After).",
    )
    variant_retire_after_failures: int = Field(
        default=3,
        ge=1,
        description="Consecutive jobs a variant may fail with runtime_error before it is retired "
        "(usable false, the reason in its JSON) and `format: auto` runs the next fitting variant "
        "or the .pt; a success starts the count again.",
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
    max_discard_bytes: int = Field(
        default=1 << 30,
        ge=0,
        description="Bytes of a body refused as too large that are read and dropped so that "
        "the client gets the 413 rather than a reset connection.",
    )
    max_image_pixels: int = Field(
        default=DEFAULT_MAX_IMAGE_PIXELS,
        ge=1,
        description="Largest image (width x height), read from its header before decoding: an "
        "upload beyond it is refused (422 image_too_large), an input becomes an error entry.",
    )
    max_class_names: int = Field(
        default=DEFAULT_MAX_CLASS_NAMES,
        ge=1,
        description="Class names a dataset or an imported model may have.",
    )
    max_class_names_bytes: int = Field(
        default=DEFAULT_MAX_CLASS_NAMES_BYTES,
        ge=1,
        description="UTF-8 bytes of all of a dataset's or model's class names together.",
    )
    max_result_bytes: int = Field(
        default=DEFAULT_MAX_RESULT_BYTES,
        ge=1024,
        description="Largest result file of one job; a job whose result would be larger fails "
        "with result_too_large.",
    )
    inline_result_bytes: int = Field(
        default=DEFAULT_INLINE_RESULT_BYTES,
        ge=0,
        le=16 << 20,
        description="Results up to this size are committed with the job's outcome, in the "
        "database, instead of written to a result file with its fsyncs; 0: every result in a "
        "file.",
    )
    retention_days: float | None = Field(
        default=None,
        gt=0,
        description="Finished jobs (records and files) older than this are deleted; empty: "
        "kept until deleted. Models they produced stay in the registry.",
    )
    max_finished_jobs: int | None = Field(
        default=None,
        ge=0,
        description="Finished jobs kept at most; the oldest beyond are deleted. Empty: no bound.",
    )
    retention_interval_s: float = Field(
        default=600.0,
        gt=0,
        description="How often finished jobs are expired and orphaned or temporary files swept.",
    )
    orphan_grace_s: float = Field(
        default=3600.0,
        ge=60,  # under a minute, an atomic write or a registry upload in progress could be swept
        description="Age an upload folder without a job, or a temporary file, must reach before "
        "the sweep removes it (younger ones may be a write in progress; a job's upload request "
        "in flight holds its folder however old).",
    )
    min_free_bytes: int = Field(
        default=1 << 30,
        ge=0,
        description="Free space data_dir, the database's folder and models_dir each need: below "
        "it, submissions and uploads get 507 and /readyz says degraded. 0: no check.",
    )
    disk_check_interval_s: float = Field(
        default=1.0,
        gt=0,
        le=60,
        description="Seconds between two looks at the free space; submissions read the last.",
    )
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
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_format: Literal["text", "json"] = Field(
        default="text", description="json: one JSON object per line, with the job id."
    )
    executor: Literal["threads", "ray"] = Field(
        default="threads",
        description='Where jobs run: "threads" of this process on this host\'s lanes, or "ray": '
        "the GPUs of a Ray cluster (pip install 'yolo-orch[ray]').",
    )
    ray_address: str = Field(
        default="",
        description='The Ray cluster with executor = "ray": "auto", "HOST:PORT" of its head, '
        'or "ray://HOST:PORT"; empty: a local one started by the server.',
    )
    ray_cpu_lanes: bool = Field(
        default=False,
        description="Give each Ray node without GPUs one `<node>/cpu` lane.",
    )
    ray_node_cache_dir: Path = Field(
        default=Path("/tmp/yolo-orch-node-cache"),
        description="On each Ray node: the folder of its cache of model weights (one "
        "sub-folder per node) and of ultralytics' settings (`ultralytics`).",
    )
    ray_node_cache_models: int = Field(
        default=8,
        ge=1,
        description="Model files and exported variants (one entry each) each Ray node keeps "
        "(least recently used go).",
    )
    ray_cancel_grace_s: float = Field(
        default=5.0,
        ge=0,
        description="Time a cancelled job on a Ray node gets to stop before its worker is killed.",
    )
    ray_poll_interval_s: float = Field(
        default=1.0, gt=0, description="How often the cluster's nodes are read (joins, losses)."
    )
    ray_namespace: str = Field(
        default="yolo-orch",
        min_length=1,
        description="The Ray namespace of this server's actors (its lanes' and its runs'): "
        "each server sharing a cluster needs its own.",
    )
    ray_telemetry_interval_s: float = Field(
        default=5.0,
        gt=0,
        description="How often each Ray node reads its own telemetry (GPUs, load, memory).",
    )
    shared_data_roots: list[Path] = Field(
        default_factory=list,
        description='With executor = "ray": folders every node sees at the same path; a '
        "training or validation dataset must be under one of them and under data_roots.",
    )
    ray_max_input_bytes: int = Field(
        default=1 << 30,
        ge=1,
        description="Bytes of images and videos one inference job carries to a Ray node "
        "(invalid_input beyond).",
    )

    @field_validator("data_dir", "data_roots", "model_roots", "shared_data_roots", mode="after")
    @classmethod
    def _resolved_once(cls, value: Path | list[Path]) -> Path | list[Path]:
        """Relative folders are taken against the working directory at load, once: handed on
        as they were, they would mean something else to whoever reads them (ultralytics files
        a relative `project` under its own runs folder)."""
        if isinstance(value, list):
            return [_absolute(path) for path in value]
        return _absolute(value)

    @field_validator("database_url", mode="after")
    @classmethod
    def _database_resolved_once(cls, url: str) -> str:
        return _absolute_sqlite_url(url) if url.startswith(SQLITE_URL_PREFIX) else url

    @field_validator("ray_node_cache_dir", mode="after")
    @classmethod
    def _node_cache_absolute(cls, value: Path) -> Path:
        """A folder on each Ray node, not on this host: the server's working directory means
        nothing there, and a Ray worker's own is a session folder of Ray's."""
        if not value.is_absolute():
            raise ValueError(
                f"ray_node_cache_dir {str(value)!r} must be an absolute path (a folder on each "
                f"Ray node): {set_setting('ray_node_cache_dir', '/var/cache/yolo-orch')}"
            )
        return value

    @field_validator("batch_max_images", mode="after")
    @classmethod
    def _batch_defaults_kept(cls, value: dict[LaneKind, int]) -> dict[LaneKind, int]:
        """`{ cuda = 16 }` changes the cuda lanes only, not turning batching off elsewhere."""
        return {**_DEFAULT_BATCH_MAX_IMAGES, **value}

    @field_validator("timeout_s", mode="after")
    @classmethod
    def _timeout_defaults_kept(cls, value: dict[KindName, float]) -> dict[KindName, float]:
        """`{ inference = 60 }` changes inference only: validation keeps its limit."""
        return {**_DEFAULT_TIMEOUTS_S, **value}

    @model_validator(mode="after")
    def _check_timeouts(self) -> Settings:
        if any(not 0 <= seconds <= MAX_TIMEOUT_S for seconds in self.timeout_s.values()):
            raise ValueError(
                f"timeout_s values must be 0..{MAX_TIMEOUT_S} seconds: "
                + set_setting("timeout_s", '{"inference": 600}')
            )
        return self

    @model_validator(mode="after")
    def _check_lanes(self) -> Settings:
        fix = set_setting("lanes", '["cuda:0", "cuda:1"]')
        if len(set(self.lanes)) != len(self.lanes):
            raise ValueError(f"lanes must not repeat: {fix}")
        for lane in self.lanes:
            if not re.fullmatch(r"cuda:\d+|cpu|sim:\d+", lane):
                raise ValueError(f"lane {lane!r} in lanes is not cuda:N, cpu or sim:N: {fix}")
        return self

    @model_validator(mode="after")
    def _check_database_url(self) -> Settings:
        url = self.database_url
        if url and url != MEMORY_DATABASE_URL and not url.startswith(SQLITE_URL_PREFIX):
            raise ValueError(
                f"database_url {url!r}: use sqlite+aiosqlite:///PATH, {MEMORY_DATABASE_URL}, or "
                "leave it empty for {data_dir}/yolo-orch.db: "
                + set_setting("database_url", f"{SQLITE_URL_PREFIX}/var/lib/yolo-orch/jobs.db")
            )
        return self

    @model_validator(mode="after")
    def _no_open_server_by_accident(self) -> Settings:
        if not self.tokens and not self.allow_unauthenticated and not _is_loopback(self.host):
            raise ValueError(
                f"host {self.host!r} is reachable from other machines and no tokens are "
                "configured: add tokens (yolo-orch token create), or "
                + set_setting("allow_unauthenticated", "true")
            )
        return self

    @property
    def sqlite_url(self) -> str:
        """The database URL in effect (the default one derived from `data_dir`)."""
        if self.database_url:
            return self.database_url
        return f"{SQLITE_URL_PREFIX}{self.data_dir / 'yolo-orch.db'}"

    @property
    def lock_files(self) -> list[Path]:
        """One server per data directory, and per database where it lives elsewhere."""
        files = [self.data_dir / "yolo-orch.lock"]
        if self.database_url.startswith(SQLITE_URL_PREFIX):
            database = Path(self.database_url.removeprefix(SQLITE_URL_PREFIX))
            if database.resolve().parent != self.data_dir.resolve():
                files.append(database.with_name(f"{database.name}.lock"))
        return files

    @property
    def jobs_dir(self) -> Path:
        return self.data_dir / "jobs"

    @property
    def models_dir(self) -> Path:
        return self.data_dir / "models"

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, env_settings, TomlConfigSettingsSource(settings_cls)


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Build settings from `config_file` (or the file `$YOLO_ORCH_CONFIG` names), the
    environment and `overrides` (command-line flags, tests)."""
    path = config_file or _env_config_file()
    if path is None:
        return Settings(**overrides)
    if not path.is_file():
        raise FileNotFoundError(f"config file not found: {path} (--config or {CONFIG_ENV_VAR})")

    class FileSettings(Settings):
        model_config = SettingsConfigDict(toml_file=path)

    return FileSettings(**overrides)


def service_manager_environment() -> dict[str, str]:
    """What systemd hands the service for its notify protocol (NOTIFY_SOCKET, WATCHDOG_USEC,
    WATCHDOG_PID): read here, like all of the environment."""
    return {
        key: value for key, value in os.environ.items() if key.startswith(("NOTIFY_", "WATCHDOG_"))
    }


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _absolute(path: Path) -> Path:
    """`~` is the server user's home, as a shell would have it; no symlink is resolved."""
    return path.expanduser().absolute()


def _absolute_sqlite_url(url: str) -> str:
    """`url` with its database file's path made absolute; an in-memory database (no path, or
    `:memory:`) and a `file:` URI as they are."""
    if url.removeprefix(SQLITE_URL_PREFIX).startswith("/"):
        return url
    # Imported here: every command loads settings, and only a relative path needs the parser.
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    database = parsed.database
    if not database or database == ":memory:" or database.startswith("file:"):
        return url
    absolute = str(_absolute(Path(database)))
    return parsed.set(database=absolute).render_as_string(hide_password=False)


def _env_config_file() -> Path | None:
    value = os.environ.get(CONFIG_ENV_VAR)
    return Path(value) if value else None


def server_paths(settings: Settings) -> ShownPaths:
    """The server's folders: data_dir (its `jobs/...` and `models/...`), the data and model
    roots, and on a Ray cluster the shared roots and the nodes' model cache."""
    return ShownPaths(
        [
            settings.data_dir,
            *settings.data_roots,
            *settings.model_roots,
            *settings.shared_data_roots,
            settings.ray_node_cache_dir,
        ]
    )
