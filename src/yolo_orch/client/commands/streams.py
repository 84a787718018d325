"""`yolo-orch stream|frames|snapshot`: live streams submitted, their frames and their latest
annotated frame."""

from __future__ import annotations

import enum
import json
from pathlib import Path
from typing import Annotated

import typer

from yolo_orch.client import render, wire
from yolo_orch.client.commands.common import (
    AsJson,
    IdempotencyKey,
    Params,
    Priority,
    Quiet,
    Token,
    Url,
    connect,
    err,
    note,
    parse_params,
    show,
)
from yolo_orch.client.commands.jobs import JobId
from yolo_orch.client.commands.submit import RegisteredModel
from yolo_orch.client.errors import ApiError, ClientCode, ExitCode
from yolo_orch.client.stream_view import (
    LINE_SYNTAX,
    ZONE_SYNTAX,
    GeometryError,
    parse_line,
    parse_zone,
    stream_status,
)
from yolo_orch.client.streams import FRAME_PAGE, caught_up
from yolo_orch.client.sync import Client
from yolo_orch.client.wire import DEFAULT_URL, Json


class Tracker(enum.StrEnum):
    bytetrack = "bytetrack"
    botsort = "botsort"


def _option(metavar: str, text: str) -> object:
    """An option without a default shown: the server's applies."""
    return typer.Option(metavar=metavar, help=text, show_default=False)


def stream(
    sources: Annotated[
        list[str],
        typer.Argument(
            metavar="SOURCE",
            help="rtsp:// or http(s):// URLs the server allows, or videos under its data roots "
            "(looped).",
            show_default=False,
        ),
    ],
    model: RegisteredModel,
    max_fps: Annotated[
        float | None, _option("F", "Frames taken per second from each source (default 5).")
    ] = None,
    track: Annotated[
        Tracker | None, _option("TRACKER", "Track objects: bytetrack or botsort.")
    ] = None,
    imgsz: Annotated[int | None, _option("PIXELS", "The forward pass's input size.")] = None,
    conf: Annotated[float | None, _option("C", "Confidence threshold.")] = None,
    lines: Annotated[
        list[str] | None,
        typer.Option(
            "--line",
            metavar=LINE_SYNTAX,
            help="A line whose crossings are counted (needs --track); coordinates 0..1 of the "
            "frame. Repeatable.",
            show_default=False,
        ),
    ] = None,
    zones: Annotated[
        list[str] | None,
        typer.Option(
            "--zone",
            metavar=ZONE_SYNTAX,
            help="A polygon whose objects are counted; quote it (the shell splits at ;). "
            "Repeatable.",
            show_default=False,
        ),
    ] = None,
    end_s: Annotated[float | None, _option("S", "Succeed after this many seconds.")] = None,
    max_frames: Annotated[
        int | None, _option("N", "Succeed after this many frames (all sources).")
    ] = None,
    follow_: Annotated[
        bool,
        typer.Option(
            "--follow",
            help="Show its health, frame rates and counts live until it ends or Ctrl-C; "
            "Ctrl-C stops the showing, not the stream (`yolo-orch cancel JOB` does).",
        ),
    ] = False,
    params: Params = None,
    priority: Priority = 0,
    idempotency_key: IdempotencyKey = None,
    quiet: Quiet = False,
    as_json: AsJson = False,
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """Submit a stream job: MODEL run on live sources until it is cancelled, or reaches
    --end-s or --max-frames. Prints its id; `frames` and `snapshot` read what it finds.

    Other stream params (snapshot_every_s, events_max_hz, reconnect_give_up_s, iou, ...) go
    with --param.
    """
    named: Json = {
        "max_fps": max_fps,
        "track": str(track) if track else None,
        "imgsz": imgsz,
        "conf": conf,
        "end_s": end_s,
        "max_frames": max_frames,
    }
    stream_params = parse_params(params) | {k: v for k, v in named.items() if v is not None}
    try:
        if lines:
            stream_params["lines"] = [parse_line(text) for text in lines]
        if zones:
            stream_params["zones"] = [parse_zone(text) for text in zones]
    except GeometryError as exc:
        raise typer.BadParameter(str(exc), param_hint="--line/--zone") from None
    with connect(url, token) as client:
        job = client.submit_stream(
            model,
            sources,
            params=stream_params,
            priority=priority,
            idempotency_key=idempotency_key,
        )
        if quiet:
            typer.echo(job.id)
        else:
            show(job, as_json, f"submitted stream {job.id} ({job.state})")
        if follow_:
            raise typer.Exit(_follow(client, job.id, quiet=quiet))


def _follow(client: Client, job_id: str, *, quiet: bool) -> ExitCode:
    """Print the stream's status line (stderr) each time it changes, until the stream ends
    (exit code as `wait`'s) or Ctrl-C (0: the stream goes on)."""
    shown = ""
    try:
        for event in client.events(job_id):
            line = stream_status(event.job)
            if line != shown:
                err().print(line, markup=False, soft_wrap=True)
                shown = line
            if event.job.state.is_terminal:
                if not quiet:
                    typer.echo(render.job_line(event.job))
                return ExitCode.for_state(event.job.state)
    except KeyboardInterrupt:
        note(f"stopped following; stream {job_id} goes on (yolo-orch cancel {job_id} stops it)")
        return ExitCode.OK
    # events end only with a terminal job, or raise
    raise ApiError("the server never showed the job", ClientCode.NO_JOB, ExitCode.UNAVAILABLE)


def frames(
    job_id: JobId,
    since: Annotated[
        int, typer.Option(min=0, metavar="N", help="Only frames with seq > N (0: the oldest kept).")
    ] = 0,
    page_size: Annotated[
        int, typer.Option(min=1, max=1000, metavar="N", help="Frames asked for a request.")
    ] = FRAME_PAGE,
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """Print a stream's frames after --since as JSON lines, oldest first, until caught up
    with it (run it again with the last `seq` as --since for more)."""
    with connect(url, token) as client:
        while True:
            page = client.stream_frames(job_id, since, limit=page_size)
            if lost := page.missed(since):
                note(f"{lost} frames after seq {since} are no longer kept")
            for frame in page.frames:
                typer.echo(json.dumps(frame.model_dump(mode="json"), ensure_ascii=False))
            since = page.next_since
            if caught_up(page, page_size):
                return


def snapshot(
    job_id: JobId,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            metavar="FILE",
            help="Where to write it (default: JOB.jpg).",
            show_default=False,
            dir_okay=False,
        ),
    ] = None,
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """Save a stream's latest annotated frame (JPEG), renewed every snapshot_every_s while it
    runs."""
    target = output or Path(f"{job_id}.jpg")
    with connect(url, token) as client:
        jpeg = client.snapshot(job_id)
    partial = wire.partial_path(target)  # a file half written never looks like a snapshot
    partial.write_bytes(jpeg)
    partial.replace(target)
    typer.echo(f"wrote {target} ({render.size(len(jpeg))})")
