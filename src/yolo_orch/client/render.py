"""How the client commands show jobs, models, variants and devices to people (`--json` bypasses
all this)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel
from rich.table import Table
from rich.text import Text

from yolo_orch.client.shapes import Devices, Job, Lane, Model, Variant

_STATE_STYLES = {
    "queued": "yellow",
    "running": "cyan",
    "succeeded": "green",
    "failed": "red",
    "cancelled": "magenta",
}


def to_json(value: Any) -> str:
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    elif isinstance(value, list):
        value = [v.model_dump(mode="json") if isinstance(v, BaseModel) else v for v in value]
    return json.dumps(value, indent=2, ensure_ascii=False)


def state_text(state: str) -> Text:
    return Text(state, style=_STATE_STYLES.get(state, ""))


def progress_text(job: Job) -> str:
    progress = job.progress
    if progress is None:
        return "-"
    if job.kind == "stream":  # no total: it runs until it is cancelled or ends
        return stream_progress(progress.done, progress.detail or {})
    return f"{progress.done}/{progress.total} {progress.unit}"


def stream_progress(frames: int, detail: dict[str, Any]) -> str:
    """`412 frames, live, 5.0/5.0 fps, p99 41 ms`: a stream's frames and health."""
    text = f"{frames} frames"
    if health := detail.get("health"):
        text += f", {health}"
    if (fps_in := detail.get("fps_in")) is not None:
        text += f", {detail.get('fps_out', 0):.1f}/{fps_in:.1f} fps"
    p99 = (detail.get("latency_ms") or {}).get("p99")
    if p99 is not None:
        text += f", p99 {p99:.0f} ms"
    return text


def job_line(job: Job) -> str:
    """One line for a job's state: `job <id> running on sim:0 (3/5 images)`."""
    state = job.state
    line = f"job {job.id} {state}"
    if state == "running":
        if job.devices:
            line += f" on {', '.join(job.devices)}"
        if job.progress:
            line += f" ({progress_text(job)})"
        if job.attempt > 1:
            line += f", attempt {job.attempt}/{job.max_attempts}"
        if job.cancel_requested:
            line += ", cancel requested"
    elif state == "succeeded":
        took = duration(job.started_at, job.finished_at)
        if took:
            line += f" in {took}"
    elif state == "failed" and job.error:
        line += f": {job.error.message} ({job.error.code})"
    return line


def job_details(job: Job) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column(overflow="fold")
    grid.add_row("id", job.id)
    grid.add_row("kind", str(job.kind))
    grid.add_row("state", state_text(job.state))
    grid.add_row("model", Text(job.model))
    if job.dataset:
        grid.add_row("dataset", Text(job.dataset))
    if job.inputs:
        shown = ", ".join(job.inputs[:5])
        if len(job.inputs) > 5:
            shown += f", ... ({len(job.inputs)} in all)"
        grid.add_row("inputs", Text(shown))
    if job.sources:  # as the server shows them: credentials redacted
        grid.add_row("sources", Text(", ".join(job.sources)))
    grid.add_row("progress", progress_text(job))
    if job.error:
        grid.add_row("error", Text(f"{job.error.message} ({job.error.code})", "red"))
    grid.add_row("priority", str(job.priority))
    grid.add_row("gpus", str(job.gpus))
    grid.add_row("devices", ", ".join(job.devices) or "-")
    grid.add_row("attempt", f"{job.attempt}/{job.max_attempts}")
    if job.cancel_requested and job.state == "running":
        grid.add_row("cancel", "requested")
    grid.add_row("created", _when(job.created_at))
    grid.add_row("started", _when(job.started_at))
    grid.add_row("finished", _when(job.finished_at))
    return grid


def _table() -> Table:
    return Table(box=None, header_style="bold", pad_edge=False)


def jobs_table(jobs: list[Job]) -> Table:
    table = _table()
    table.add_column("ID", no_wrap=True, min_width=36)
    for name in ("KIND", "STATE"):
        table.add_column(name)
    table.add_column("MODEL", overflow="fold")
    table.add_column("PROGRESS")
    table.add_column("PRIO", justify="right")
    table.add_column("AGE", justify="right")
    for job in jobs:
        table.add_row(
            job.id,
            str(job.kind),
            state_text(job.state),
            Text(job.model),
            progress_text(job),
            str(job.priority),
            _age(job.created_at),
        )
    return table


def model_line(model: Model) -> str:
    return (
        f"model {model.name} ({model.id}): task {model.task}, {len(model.class_names)} classes, "
        f"{size(model.size_bytes)}, sha256 {model.sha256[:12]}"
    )


def models_table(models: list[Model]) -> Table:
    table = _table()
    table.add_column("NAME", overflow="fold")
    table.add_column("ID", no_wrap=True, min_width=36)
    table.add_column("TASK")
    table.add_column("CLASSES", justify="right")
    table.add_column("SIZE", justify="right")
    table.add_column("SHA256")
    table.add_column("AGE", justify="right")
    for model in models:
        name = Text(model.name)
        if not model.usable:
            name.append(" (unusable)", style="red")
        table.add_row(
            name,
            model.id,
            model.task,
            str(len(model.class_names)),
            size(model.size_bytes),
            model.sha256[:12],
            _age(model.created_at),
        )
    return table


def variant_line(variant: Variant) -> str:
    return f"variant {variant.id}: {variant_build(variant)}, {size(variant.size_bytes)}"


def variant_build(variant: Variant) -> str:
    """`openvino 320 half dynamic batch 4`: the format and what it was built for."""
    lineage = variant.lineage
    words = [variant.format, str(lineage.imgsz)]
    words += [flag for flag in ("half", "int8", "dynamic") if getattr(lineage, flag)]
    if lineage.batch > 1:
        words.append(f"batch {lineage.batch}")
    return " ".join(words)


def variants_table(variants: list[Variant]) -> Table:
    table = _table()
    table.add_column("ID", no_wrap=True, min_width=36)
    table.add_column("BUILD")
    table.add_column("SIZE", justify="right")
    table.add_column("SOURCE")
    table.add_column("AGE", justify="right")
    for variant in variants:
        build = Text(variant_build(variant))
        if not variant.usable:
            build.append(f" (unusable: {variant.unusable_reason or '?'})", style="red")
        table.add_row(
            variant.id, build, size(variant.size_bytes), variant.source, _age(variant.created_at)
        )
    return table


def devices_table(devices: Devices) -> Table:
    """The lanes, telemetry in human units; a column only where some lane has a value."""
    lanes = devices.devices
    table = _table()
    columns: list[tuple[str, Any]] = [
        ("LANE", _lane_name),
        ("BUSY", lambda lane: f"{lane.busy}/{lane.slots}"),
        ("JOBS", lambda lane: Text(", ".join(lane.jobs) or "-")),
        ("MODELS", lambda lane: Text(", ".join(lane.models) or "-")),
    ]
    if any(lane.memory_total_bytes for lane in lanes):
        columns.append(("MEMORY", _memory))
    if any(lane.utilization_percent is not None for lane in lanes):
        columns.append(("UTIL", lambda lane: _maybe(lane.utilization_percent, "{} %")))
    if any(lane.temperature_c is not None for lane in lanes):
        columns.append(("TEMP", lambda lane: _maybe(lane.temperature_c, "{} °C")))
    if any(lane.power_w is not None for lane in lanes):
        columns.append(("POWER", lambda lane: _maybe(lane.power_w, "{:.0f} W")))
    if any(lane.streams for lane in lanes):
        columns.append(("STREAMS", _streams))
    if any(lane.batch_sizes for lane in lanes):
        columns.append(("BATCHES", lambda lane: batch_sizes(lane.batch_sizes)))
    for name, _ in columns:
        if name in ("JOBS", "MODELS", "STREAMS"):
            table.add_column(name, overflow="fold")
        else:
            table.add_column(name, justify="left" if name == "LANE" else "right")
    for lane in lanes:
        table.add_row(*(cell(lane) for _, cell in columns))
    return table


def _streams(lane: Lane) -> Text:
    """`2/4: 9.8 of 10 fps`: the lane's streams, and the frames per second they get of what
    they ask."""
    out = sum(stream.fps_out or 0 for stream in lane.streams)
    asked = sum(stream.fps_asked for stream in lane.streams)
    return Text(f"{len(lane.streams)}/{lane.stream_slots}: {out:.1f} of {asked:g} fps")


def _lane_name(lane: Lane) -> Text:
    name = Text(lane.id)
    if lane.device_name:
        name.append(f" ({lane.device_name})")
    if lane.wedged:
        name.append(" wedged", style="red")
    elif not lane.healthy:
        name.append(" unhealthy", style="red")
    return name


def _memory(lane: Lane) -> str:
    if lane.memory_used_bytes is None or not lane.memory_total_bytes:
        return "-"
    return f"{binary_size(lane.memory_used_bytes)} / {binary_size(lane.memory_total_bytes)}"


def _maybe(value: float | None, form: str) -> str:
    return "-" if value is None else form.format(value)


def batch_sizes(sizes: dict[int, int]) -> str:
    """Runs by the number of jobs sharing them, as `1×15, 8×3`: 15 runs alone, 3 of 8 jobs."""  # noqa: RUF002 - the sign people read
    runs = (f"{jobs}×{count}" for jobs, count in sorted(sizes.items()))  # noqa: RUF001
    return ", ".join(runs) or "-"


def binary_size(n: int) -> str:
    """GPU memory as nvidia-smi counts it: `1.2 GiB`, `80 GiB`."""
    if n < 1024:
        return f"{n} B"
    value, unit = n / 1024, "KiB"
    for larger in ("MiB", "GiB", "TiB"):
        if value < 1024:
            break
        value, unit = value / 1024, larger
    return f"{value:.0f} {unit}" if value >= 10 or value == int(value) else f"{value:.1f} {unit}"


def size(n: int) -> str:
    value = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000:
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} TB"


def _when(moment: datetime | None) -> str:
    if moment is None:
        return "-"
    return _aware(moment).astimezone().strftime("%Y-%m-%d %H:%M:%S")


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def duration(start: datetime | None, end: datetime | None) -> str:
    if start is None or end is None:
        return ""
    return seconds((_aware(end) - _aware(start)).total_seconds())


def _age(moment: datetime | None) -> str:
    if moment is None:
        return "-"
    return seconds((datetime.now(UTC) - _aware(moment)).total_seconds(), precise=False)


def seconds(value: float, precise: bool = True) -> str:
    value = max(value, 0.0)
    if value < 60:
        return f"{value:.1f}s" if precise else f"{int(value)}s"
    minutes, secs = divmod(int(value), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes:02d}m"
    return f"{hours // 24}d"
