"""Settings: embedded defaults < TOML file < `YOLO_ORCH_*` environment < explicit overrides.

`Settings` joins the groups of settings (`serving`, `work`, `cluster`: one class per heading of
docs/configuration.md) and checks what spans them.

This is the only module that reads the environment or configuration files.
"""

from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path
from typing import Any

from pydantic import field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from yolo_orch.config.cluster import RayCluster
from yolo_orch.config.heads import Heads
from yolo_orch.config.label_studio import LabelStudio
from yolo_orch.config.serving import (
    RequestsAndConnections,
    Scope,
    Security,
    ServerAndStorage,
    Telemetry,
    Token,
)
from yolo_orch.config.streams import LiveStreams
from yolo_orch.config.webhooks import Webhooks
from yolo_orch.config.work import (
    DEFAULT_BATCH_MAX_IMAGES,
    DEFAULT_TIMEOUTS_S,
    DataAndModelRoots,
    JobLimits,
    LaneKind,
    LanesAndRuntime,
    ResultsRetentionDisk,
)
from yolo_orch.domain import JobKind
from yolo_orch.files.shown_paths import ShownPaths
from yolo_orch.params.common import MAX_TIMEOUT_S
from yolo_orch.setting_hints import ENV_PREFIX, set_setting

CONFIG_ENV_VAR = "YOLO_ORCH_CONFIG"
MEMORY_DATABASE_URL = "memory://"
SQLITE_URL_PREFIX = "sqlite+aiosqlite:///"
POSTGRES_URL_PREFIX = "postgresql+psycopg://"


class Settings(
    ServerAndStorage,
    LanesAndRuntime,
    JobLimits,
    DataAndModelRoots,
    RequestsAndConnections,
    Security,
    ResultsRetentionDisk,
    LiveStreams,
    Webhooks,
    LabelStudio,
    Telemetry,
    RayCluster,
    Heads,
    BaseSettings,
):
    model_config = SettingsConfigDict(
        title="Settings",
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
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

    @field_validator("datasets_dir", mode="after")
    @classmethod
    def _datasets_dir_resolved_once(cls, value: Path | None) -> Path | None:
        return None if value is None else _absolute(value)

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
        return {**DEFAULT_BATCH_MAX_IMAGES, **value}

    @field_validator("timeout_s", mode="after")
    @classmethod
    def _timeout_defaults_kept(cls, value: dict[JobKind, float]) -> dict[JobKind, float]:
        """`{ inference = 60 }` changes inference only: validation keeps its limit."""
        return {**DEFAULT_TIMEOUTS_S, **value}

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
        durable = (SQLITE_URL_PREFIX, POSTGRES_URL_PREFIX)
        if url and url != MEMORY_DATABASE_URL and not url.startswith(durable):
            raise ValueError(
                f"database_url {_without_password(url)!r}: use sqlite+aiosqlite:///PATH, "
                f"{POSTGRES_URL_PREFIX}USER:PASSWORD@HOST:PORT/DATABASE, "
                f"{MEMORY_DATABASE_URL}, or leave it empty for {{data_dir}}/yolo-orch.db: "
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
    def store_url(self) -> str:
        """The database URL in effect (the default one derived from `data_dir`)."""
        if self.database_url:
            return self.database_url
        return f"{SQLITE_URL_PREFIX}{self.data_dir / 'yolo-orch.db'}"

    @property
    def advertised_url(self) -> str:
        """Where the other heads on the database send clients while this one is active."""
        return self.head_url or f"http://{self.host}:{self.port}"

    @property
    def lock_files(self) -> list[Path]:
        """One server per data directory, and per database where it lives elsewhere. On
        PostgreSQL none: the heads share `data_dir`, and the lease lets one of them run jobs."""
        if self.database_url.startswith(POSTGRES_URL_PREFIX):
            return []
        files = [self.data_dir / "yolo-orch.lock"]
        if self.database_url.startswith(SQLITE_URL_PREFIX):
            database = Path(self.database_url.removeprefix(SQLITE_URL_PREFIX))
            if database.resolve().parent != self.data_dir.resolve():
                files.append(database.with_name(f"{database.name}.lock"))
        return files

    @property
    def datasets_root(self) -> Path:
        """Where managed datasets live: `datasets_dir`, else `datasets` in the first data
        root, else in data_dir."""
        if self.datasets_dir is not None:
            return self.datasets_dir
        return (self.data_roots[0] if self.data_roots else self.data_dir) / "datasets"

    @property
    def job_read_roots(self) -> list[Path]:
        """The folders a job's runner reads under: the data roots, and the datasets folder
        (training on a managed dataset) when it is in none of them. Submissions still name
        paths under the data roots only."""
        root = self.datasets_root
        if any(root.is_relative_to(data_root) for data_root in self.data_roots):
            return list(self.data_roots)
        return [*self.data_roots, root]

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


def _without_password(url: str) -> str:
    """`url` as an error message may show it: a PostgreSQL URL's password masked."""
    if "@" not in url or "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    user_info, at_host = rest.rsplit("@", 1)
    return f"{scheme}://{user_info.split(':', 1)[0]}:***@{at_host}" if ":" in user_info else url


def shown_database_url(url: str) -> str:
    """A database URL for logs and the banner: a SQLite file's path, or the URL without its
    password."""
    return (
        url.removeprefix(SQLITE_URL_PREFIX)
        if url.startswith(SQLITE_URL_PREFIX)
        else (_without_password(url))
    )


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
    """The server's folders: data_dir (its `jobs/...` and `models/...`), the data roots (with
    the datasets folder), the model roots, and on a Ray cluster the shared roots and the
    nodes' model cache."""
    return ShownPaths(
        [
            settings.data_dir,
            *settings.job_read_roots,
            *settings.model_roots,
            *settings.shared_data_roots,
            settings.ray_node_cache_dir,
        ]
    )


__all__ = [
    "CONFIG_ENV_VAR",
    "MEMORY_DATABASE_URL",
    "SQLITE_URL_PREFIX",
    "LaneKind",
    "Scope",
    "Settings",
    "Token",
    "load_settings",
    "server_paths",
    "service_manager_environment",
]
