"""How the client commands show jobs, models and devices to people (`--json` bypasses all this)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text

from yolo_orch.client.errors import TERMINAL_STATES
from yolo_orch.client.http import Json

_STATE_STYLES = {
    "queued": "yellow",
    "running": "cyan",
    "succeeded": "green",
    "failed": "red",
    "cancelled": "magenta",
}


def to_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def state_text(state: str) -> Text:
    return Text(state, style=_STATE_STYLES.get(state, ""))


def progress_text(job: Json) -> str:
    progress = job.get("progress")
    if not progress:
        return "-"
    return f"{progress['done']}/{progress['total']} {progress['unit']}"


def job_line(job: Json) -> str:
    """One line for a job's state: `job <id> running on sim:0 (3/5 images)`."""
    state = job["state"]
    line = f"job {job['id']} {state}"
    if state == "running":
        if job.get("devices"):
            line += f" on {', '.join(job['devices'])}"
        if job.get("progress"):
            line += f" ({progress_text(job)})"
        if job.get("attempt", 1) > 1:
            line += f", attempt {job['attempt']}/{job['max_attempts']}"
        if job.get("cancel_requested"):
            line += ", cancel requested"
    elif state == "succeeded":
        took = _duration(job.get("started_at"), job.get("finished_at"))
        if took:
            line += f" in {took}"
    elif state == "failed" and job.get("error"):
        line += f": {job['error']['message']} ({job['error']['code']})"
    return line


def job_details(job: Json) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column(overflow="fold")
    grid.add_row("id", job["id"])
    grid.add_row("kind", job["kind"])
    grid.add_row("state", state_text(job["state"]))
    grid.add_row("model", Text(job["model"]))
    if job.get("dataset"):
        grid.add_row("dataset", Text(job["dataset"]))
    if job.get("inputs"):
        inputs = job["inputs"]
        shown = ", ".join(inputs[:5]) + (f", ... ({len(inputs)} in all)" if len(inputs) > 5 else "")
        grid.add_row("inputs", Text(shown))
    grid.add_row("progress", progress_text(job))
    if job.get("error"):
        grid.add_row("error", Text(f"{job['error']['message']} ({job['error']['code']})", "red"))
    grid.add_row("priority", str(job["priority"]))
    grid.add_row("gpus", str(job["gpus"]))
    grid.add_row("devices", ", ".join(job.get("devices") or []) or "-")
    grid.add_row("attempt", f"{job['attempt']}/{job['max_attempts']}")
    if job.get("cancel_requested") and job["state"] == "running":
        grid.add_row("cancel", "requested")
    grid.add_row("created", _when(job.get("created_at")))
    grid.add_row("started", _when(job.get("started_at")))
    grid.add_row("finished", _when(job.get("finished_at")))
    return grid


def jobs_table(jobs: list[Json]) -> Table:
    table = Table(box=None, header_style="bold", pad_edge=False)
    table.add_column("ID", no_wrap=True, min_width=36)
    table.add_column("KIND")
    table.add_column("STATE")
    table.add_column("MODEL", overflow="fold")
    table.add_column("PROGRESS")
    table.add_column("PRIO", justify="right")
    table.add_column("AGE", justify="right")
    for job in jobs:
        table.add_row(
            job["id"],
            job["kind"],
            state_text(job["state"]),
            Text(job["model"]),
            progress_text(job),
            str(job["priority"]),
            _age(job.get("created_at")),
        )
    return table


def model_line(model: Json) -> str:
    classes = model.get("class_names") or []
    return (
        f"model {model['name']} ({model['id']}): task {model['task']}, {len(classes)} classes, "
        f"{_size(model['size_bytes'])}, sha256 {model['sha256'][:12]}"
    )


def models_table(models: list[Json]) -> Table:
    table = Table(box=None, header_style="bold", pad_edge=False)
    table.add_column("NAME", overflow="fold")
    table.add_column("ID", no_wrap=True, min_width=36)
    table.add_column("TASK")
    table.add_column("CLASSES", justify="right")
    table.add_column("SIZE", justify="right")
    table.add_column("SHA256")
    table.add_column("AGE", justify="right")
    for model in models:
        name = Text(model["name"])
        if not model.get("usable", True):
            name.append(" (unusable)", style="red")
        table.add_row(
            name,
            model["id"],
            model["task"],
            str(len(model.get("class_names") or [])),
            _size(model["size_bytes"]),
            model["sha256"][:12],
            _age(model.get("created_at")),
        )
    return table


_LANE_COLUMNS = {"id", "slots", "busy", "jobs", "models"}


def devices_table(devices: list[Json]) -> Table:
    """The lanes; fields the server adds (telemetry) become extra columns."""
    extra = [
        key for device in devices for key in device if key not in _LANE_COLUMNS and key != "name"
    ]
    extra = list(dict.fromkeys(extra))
    table = Table(box=None, header_style="bold", pad_edge=False)
    table.add_column("LANE", no_wrap=True)
    table.add_column("BUSY", justify="right")
    table.add_column("JOBS", overflow="fold")
    table.add_column("MODELS", overflow="fold")
    for key in extra:
        table.add_column(key.upper().replace("_", " "), justify="right")
    for device in devices:
        lane = device["id"] + (f" ({device['name']})" if device.get("name") else "")
        table.add_row(
            Text(lane),
            f"{device.get('busy', 0)}/{device.get('slots', 1)}",
            Text(", ".join(device.get("jobs") or []) or "-"),
            Text(", ".join(device.get("models") or []) or "-"),
            *(_cell(device.get(key)) for key in extra),
        )
    return table


class JobProgress:
    """Shows a job that is being followed: a live bar on a terminal; elsewhere (a log, a pipe)
    one line each time its state changes."""

    def __init__(self, console: Console, job_id: str, *, silent: bool = False) -> None:
        self._console = console
        self._silent = silent
        self._job_id = job_id
        self._last_line: str | None = None
        self._last_state: str | None = None
        self._bar: Progress | None = None
        self._task: TaskID | None = None
        if console.is_terminal and not silent:
            self._bar = Progress(
                SpinnerColumn(),
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                TextColumn("{task.fields[count]}"),
                TimeElapsedColumn(),
                console=console,
                transient=True,
            )

    def __enter__(self) -> JobProgress:
        if self._bar is not None:
            self._bar.start()
            self._task = self._bar.add_task(f"job {self._job_id[:8]} ...", total=None, count="")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._bar is not None:
            self._bar.stop()

    def update(self, job: Json) -> None:
        if self._silent:
            return
        if self._bar is None or self._task is None:
            # A line per state, not per progress tick; the final state is the caller's to show.
            if job["state"] != self._last_state and job["state"] not in TERMINAL_STATES:
                self._console.print(Text(job_line(job)), soft_wrap=True)
            self._last_state = job["state"]
            return
        progress = job.get("progress") or {}
        self._bar.update(
            self._task,
            description=f"job {self._job_id[:8]} {job['state']}",
            completed=progress.get("done", 0),
            total=progress.get("total") or None,
            count=progress_text(job) if progress else "",
        )


def _cell(value: Any) -> Text:
    if value is None:
        return Text("-")
    if isinstance(value, list | dict):
        return Text(json.dumps(value))
    return Text(str(value))


def _parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _when(value: str | None) -> str:
    moment = _parse_time(value)
    if moment is None:
        return "-"
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def _duration(start: str | None, end: str | None) -> str:
    began, ended = _parse_time(start), _parse_time(end)
    if began is None or ended is None:
        return ""
    return _seconds((ended - began).total_seconds())


def _age(value: str | None) -> str:
    moment = _parse_time(value)
    if moment is None:
        return "-"
    return _seconds((datetime.now(UTC) - moment).total_seconds(), precise=False)


def _seconds(seconds: float, precise: bool = True) -> str:
    seconds = max(seconds, 0.0)
    if seconds < 60:
        return f"{seconds:.1f}s" if precise else f"{int(seconds)}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes:02d}m"
    return f"{hours // 24}d"


def _size(n: int) -> str:
    size = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1000:
            return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} TB"
