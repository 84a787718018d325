"""The block `serve` logs once it listens: what is in force (the folders, lanes, runtime,
executor, authentication, the connection cap) and where to look, so that a new operator need
not guess which settings won. One record: a text log shows it as lines, a JSON log as one."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

from yolo_orch import __version__
from yolo_orch.api.deps import Services
from yolo_orch.config import MEMORY_DATABASE_URL, Settings, shown_database_url
from yolo_orch.setting_hints import env_var


@dataclass(frozen=True)
class OpenFiles:
    """The process's descriptor limits once raised, and the cap on client connections they
    leave (`api.connections.connection_limit`)."""

    soft: int
    hard: int
    connections: int


def base_url(host: str, port: int) -> str:
    """A URL of the server bound to `host`: an unspecified address (all of them) is reached on
    loopback, which the server always answers to."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return f"http://{host}:{port}"
    if address.is_unspecified:
        address = ipaddress.ip_address("::1" if address.version == 6 else "127.0.0.1")
    shown = f"[{address}]" if address.version == 6 else str(address)
    return f"http://{shown}:{port}"


def startup_banner(services: Services, url: str, open_files: OpenFiles) -> str:
    settings = services.settings
    tokens = len(settings.tokens)
    metrics_token = " (token needed)" if tokens and not settings.metrics_public else ""
    docs_token = " (token needed)" if tokens and settings.docs_require_token else ""
    lanes = services.lanes
    executor: str = settings.executor
    if services.cluster is not None:
        executor += f" (cluster {settings.ray_address or 'started locally'})"
    lines = [
        f"yolo-orch {__version__} listening on {url}",
        f"  dashboard: {url}/   API page: {url}/docs{docs_token}   "
        f"metrics: {url}/metrics{metrics_token}",
        f"  data_dir: {settings.data_dir}   database: {_database(settings)}",
        f"  data_roots: {_folders(settings.data_roots, 'data_roots')}",
        f"  model_roots: {_folders(settings.model_roots, 'model_roots')}",
    ]
    if (head := services.leadership) is not None:
        lines.append(
            f"  head: {head.role} (lease epoch {head.epoch}), writes served at {head.url}"
            if head.epoch is not None
            else f"  head: {head.role}, sending writes to {head.active_url or 'none yet'}"
        )
    if services.cluster is not None:
        shared = _folders(settings.shared_data_roots, "shared_data_roots")
        lines.append(f"  shared_data_roots: {shared}")
    lines += [
        f"  lanes: {', '.join(lanes.ids) or 'none yet'} ({settings.slots_per_lane} slot(s) each), "
        f"runtime {services.runtime.name}, executor {executor}",
        "  auth: " + (f"on ({tokens} token(s))" if tokens else "off (no tokens)"),
        f"  connections: at most {open_files.connections} (open files: limit "
        f"{open_files.soft}, hard limit {open_files.hard}), held requests: at most "
        f"{settings.max_held_requests}",
    ]
    return "\n".join(lines)


def _database(settings: Settings) -> str:
    if settings.database_url == MEMORY_DATABASE_URL:
        return "in memory (nothing survives a restart)"
    return shown_database_url(settings.store_url)


def _folders(paths: list[Path], name: str) -> str:
    if not paths:
        return f"none (set {name} or {env_var(name)})"
    return ", ".join(str(path) for path in paths)
