"""What the client commands share: their options, the connection, printing, and following a job
to its end."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer
from rich.console import Console, RenderableType
from rich.text import Text

from yolo_orch.client import render
from yolo_orch.client.errors import ApiError, ClientCode, ExitCode
from yolo_orch.client.progress import JobProgress
from yolo_orch.client.shapes import Job
from yolo_orch.client.summary import job_summary
from yolo_orch.client.sync import Client
from yolo_orch.client.wire import TOKEN_ENV, URL_ENV, Json

_CONNECTION = "Connection"
SUBMIT_WAIT_S = 10.0
"""How long `--wait` has the server hold its answer to a submission before following the job
live: a quick job comes back finished in that answer."""

Url = Annotated[
    str,
    typer.Option(
        "--url", envvar=URL_ENV, metavar="URL", help="The server.", rich_help_panel=_CONNECTION
    ),
]
Token = Annotated[
    str | None,
    typer.Option(
        "--token",
        envvar=TOKEN_ENV,
        metavar="TOKEN",
        help="Bearer token (see `yolo-orch token create`).",
        show_default=False,
        rich_help_panel=_CONNECTION,
    ),
]
AsJson = Annotated[
    bool, typer.Option("--json", help="Print the server's JSON answer (for scripts).")
]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="Print only the job id.")]
Priority = Annotated[int, typer.Option(min=-100, max=100, metavar="N", help="Higher starts first.")]
IdempotencyKey = Annotated[
    str | None,
    typer.Option(
        metavar="KEY", help="Retries with the same key return the same job.", show_default=False
    ),
]
WaitForEnd = Annotated[
    bool,
    typer.Option(
        "--wait", "-w", help="Wait for the job to end, then summarise it (exit code as `wait`)."
    ),
]
Params = Annotated[
    list[str] | None,
    typer.Option(
        "--param",
        "-p",
        metavar="KEY=VALUE",
        help="A job parameter (conf=0.5, epochs=3, classes=[0,2], half=true); VALUE is read "
        "as JSON when it parses, else taken as a string. Repeatable.",
        show_default=False,
    ),
]
ModelRef = Annotated[
    str, typer.Argument(metavar="MODEL", help="The model's name or id.", show_default=False)
]


def parse_params(pairs: list[str] | None) -> Json:
    """`KEY=VALUE` pairs; a VALUE that parses as JSON is taken as that (3, 0.5, true, [0, 2]),
    any other as a string."""
    params: Json = {}
    for pair in pairs or []:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise typer.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint="--param")
        value: Any
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        params[key] = value
    return params


@contextmanager
def connect(url: str, token: str | None) -> Iterator[Client]:
    """A client for one command; a failed request ends the command with its exit code."""
    try:
        # typer has read $YOLO_ORCH_URL and $YOLO_ORCH_TOKEN; "" is no token, not "read it".
        with Client(url, token or "") as client:
            yield client
    except ApiError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(exc.exit_code) from None


def show(value: Any, as_json: bool, human: RenderableType) -> None:
    """The server's JSON, or the human view of it (a line, a table)."""
    if as_json:
        typer.echo(render.to_json(value))
    elif isinstance(human, str):
        typer.echo(human)
    else:
        out().print(human)


_PIPE_WIDTH = 500


def out() -> Console:
    console = Console(highlight=False)
    if not console.is_terminal:  # a pipe or a file: tables keep their natural width
        console = Console(highlight=False, width=_PIPE_WIDTH)
    return console


def err() -> Console:
    return Console(stderr=True, highlight=False)


def submitted(client: Client, job: Job, *, wait_: bool, quiet: bool, as_json: bool) -> None:
    """Print a job just submitted; with --wait, its end and summary, then exit with its code."""
    if quiet:
        typer.echo(job.id)
    elif not (as_json and wait_):
        show(job, as_json, f"submitted job {job.id} ({job.state})")
    if wait_:
        raise typer.Exit(follow(client, job, as_json=as_json, quiet=quiet))


def follow(client: Client, job: Job | str, *, as_json: bool, quiet: bool) -> ExitCode:
    """Follow the job to its end (unless it has ended); print it and what it came to; the
    exit code for it."""
    final = job if isinstance(job, Job) and job.state.is_terminal else None
    if final is None:
        job_id = job.id if isinstance(job, Job) else job
        with JobProgress(err(), job_id, client.metrics, silent=quiet or as_json) as view:
            for event in client.events(job_id):
                final = event.job
                view.update(final)
    if final is None:  # events end only with a terminal job or an error
        raise ApiError("the server never showed the job", ClientCode.NO_JOB, ExitCode.UNAVAILABLE)
    if as_json:
        typer.echo(render.to_json(final))
    elif not quiet:
        typer.echo(render.job_line(final))
        for line in job_summary(final, client):
            typer.echo(f"  {line}")
    return ExitCode.for_state(final.state)


def note(text: str) -> None:
    """A hint on stderr, out of the way of what scripts read."""
    err().print(Text(text, style="dim"))
