"""The client commands of `yolo-orch`: submit, status, wait, cancel, delete, list, result, devices
(and `validate` and `models`, in `client.validate` and `client.models`). Each talks to a running
server over HTTP (`--url`, `--token`)."""

from __future__ import annotations

import enum
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console, RenderableType
from rich.text import Text

from yolo_orch.client import render
from yolo_orch.client.errors import TERMINAL_STATES, ApiError, ExitCode
from yolo_orch.client.follow import follow_job
from yolo_orch.client.http import DEFAULT_URL, ApiClient, Json

_CONNECTION = "Connection"
SUBMIT_WAIT_S = 10.0
"""How long `submit --wait` has the server hold its answer before following the job live."""

Url = Annotated[
    str,
    typer.Option("--url", envvar="YOLO_ORCH_URL", help="The server.", rich_help_panel=_CONNECTION),
]
Token = Annotated[
    str | None,
    typer.Option(
        "--token",
        envvar="YOLO_ORCH_TOKEN",
        help="Bearer token (see `yolo-orch token create`).",
        show_default=False,
        rich_help_panel=_CONNECTION,
    ),
]
AsJson = Annotated[
    bool, typer.Option("--json", help="Print the server's JSON answer (for scripts).")
]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="Print only the job id.")]
Priority = Annotated[int, typer.Option(min=-100, max=100, help="Higher starts first.")]
IdempotencyKey = Annotated[
    str | None,
    typer.Option(help="Retries with the same key return the same job.", show_default=False),
]
WaitForEnd = Annotated[
    bool, typer.Option("--wait", "-w", help="Wait for the job to end, as `wait` does.")
]
JobId = Annotated[str, typer.Argument(metavar="JOB", help="The job's id.", show_default=False)]


class State(enum.StrEnum):
    queued = "queued"
    running = "running"
    succeeded = "succeeded"
    failed = "failed"
    cancelled = "cancelled"


class Kind(enum.StrEnum):
    inference = "inference"
    training = "training"
    validation = "validation"
    export = "export"


def register(app: typer.Typer) -> None:
    for name, command in (
        ("submit", submit),
        ("status", status),
        ("wait", wait),
        ("cancel", cancel),
        ("delete", delete),
        ("list", list_jobs),
        ("result", result),
    ):
        app.command(name, rich_help_panel="Jobs")(command)
    # They build on this module's options and helpers.
    from yolo_orch.client.models import models_app
    from yolo_orch.client.validate import validate

    app.command("validate", rich_help_panel="Jobs")(validate)
    app.add_typer(models_app, name="models", rich_help_panel="Host")
    app.command(rich_help_panel="Host")(devices)


def submit(
    model: Annotated[
        str,
        typer.Option(
            "--model",
            "-m",
            help="A registered model (name or id), or an architecture "
            "such as yolo11n.yaml for training.",
            show_default=False,
        ),
    ],
    inputs: Annotated[
        list[str] | None,
        typer.Option(
            "--input",
            "-i",
            metavar="PATTERN",
            help="Inference: an image path or glob on the server, under a data root. Repeatable.",
            show_default=False,
        ),
    ] = None,
    files: Annotated[
        list[Path] | None,
        typer.Option(
            "--file",
            "-f",
            metavar="PATH",
            help="Inference: a local image to upload with the job. Repeatable.",
            exists=True,
            dir_okay=False,
            readable=True,
            show_default=False,
        ),
    ] = None,
    training: Annotated[
        bool, typer.Option("--training", help="Submit a training job (default: inference).")
    ] = False,
    dataset: Annotated[
        str | None,
        typer.Option(
            help="Training: a data.yaml on the server, under a data root.", show_default=False
        ),
    ] = None,
    gpus: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Training: lanes to hold for the whole run [default: 1].",
            show_default=False,
        ),
    ] = None,
    params: Annotated[
        list[str] | None,
        typer.Option(
            "--param",
            "-p",
            metavar="KEY=VALUE",
            help="A job parameter (conf=0.5, epochs=3, classes=[0,2], half=true); VALUE is read "
            "as JSON when it parses, else taken as a string. Repeatable.",
            show_default=False,
        ),
    ] = None,
    priority: Priority = 0,
    idempotency_key: IdempotencyKey = None,
    wait_: WaitForEnd = False,
    quiet: Quiet = False,
    as_json: AsJson = False,
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """Submit an inference or a training job.

    Inference takes images already on the server (--input) or uploads local ones (--file).
    With --wait the exit code is the job's, as for `wait`.
    """
    _check_job_shape(training, inputs, files, dataset, gpus)
    job_params = parse_params(params or [])
    # A quick job comes back finished in the submission's own answer; a longer one is then
    # followed live, with its progress bar.
    wait_s = SUBMIT_WAIT_S if wait_ else None
    with connect(url, token) as api:
        if training:
            body: Json = {"kind": "training", "model": model, "gpus": gpus or 1}
            if dataset is not None:
                body["dataset"] = dataset
            job = api.submit(
                body | {"params": job_params, "priority": priority}, idempotency_key, wait_s
            )
        elif files:
            job = api.submit_upload(model, files, job_params, priority, idempotency_key, wait_s)
        else:
            body = {"kind": "inference", "model": model, "inputs": inputs}
            job = api.submit(
                body | {"params": job_params, "priority": priority}, idempotency_key, wait_s
            )
        submitted(api, job, wait_=wait_, quiet=quiet, as_json=as_json)


def status(
    job_id: JobId, as_json: AsJson = False, url: Url = DEFAULT_URL, token: Token = None
) -> None:
    """Show a job: state, progress, error. Exits 1 if it failed, 2 if it was cancelled."""
    with connect(url, token) as api:
        job = api.job(job_id)
    show(job, as_json, render.job_details(job))
    raise typer.Exit(ExitCode.for_state(job["state"]))


def wait(
    job_id: JobId,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Print nothing; see the exit code.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the final job as JSON.")] = False,
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """Follow a job until it ends, with a live progress bar.

    Exits 0 if it succeeded, 1 if it failed, 2 if it was cancelled.
    """
    with connect(url, token) as api:
        raise typer.Exit(_follow(api, job_id, as_json=as_json, quiet=quiet))


def cancel(
    job_id: JobId, as_json: AsJson = False, url: Url = DEFAULT_URL, token: Token = None
) -> None:
    """Cancel a job: a queued one at once, a running one at its next safe point."""
    with connect(url, token) as api:
        job = api.cancel(job_id)
    if job["state"] == "cancelled":
        line = f"job {job_id} cancelled"
    else:
        line = f"cancel requested: job {job_id} stops at its next safe point"
    show(job, as_json, line)


def delete(job_id: JobId, url: Url = DEFAULT_URL, token: Token = None) -> None:
    """Delete a finished job's record and files (refused while it is queued or running; a
    model it produced stays registered)."""
    with connect(url, token) as api:
        api.delete_job(job_id)
    typer.echo(f"deleted job {job_id}")


def list_jobs(
    states: Annotated[
        list[State] | None,
        typer.Option(
            "--state", "-s", help="Only jobs in this state. Repeatable.", show_default=False
        ),
    ] = None,
    kinds: Annotated[
        list[Kind] | None,
        typer.Option(
            "--kind", "-k", help="Only jobs of this kind. Repeatable.", show_default=False
        ),
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=500, help="Jobs per page.")] = 20,
    cursor: Annotated[
        str | None,
        typer.Option(help="Start after this page (a `next_cursor`).", show_default=False),
    ] = None,
    all_pages: Annotated[bool, typer.Option("--all", help="Follow every page.")] = False,
    as_json: AsJson = False,
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """List jobs, newest first."""
    state_values = [state.value for state in states or []]
    kind_values = [kind.value for kind in kinds or []]
    jobs: list[Json] = []
    with connect(url, token) as api:
        while True:
            page = api.jobs(state_values, kind_values, limit, cursor)
            jobs += page["jobs"]
            cursor = page.get("next_cursor")
            if not all_pages or cursor is None:
                break
    if as_json:
        typer.echo(render.to_json({"jobs": jobs, "next_cursor": cursor}))
        return
    console = _out()
    if not jobs:
        console.print("no jobs")
    else:
        console.print(render.jobs_table(jobs))
    if cursor is not None:
        _err().print(Text(f"more jobs: --all, or --cursor {cursor}", style="dim"))


def result(job_id: JobId, url: Url = DEFAULT_URL, token: Token = None) -> None:
    """Print the full result of a succeeded job (JSON)."""
    with connect(url, token) as api:
        body = api.result(job_id)
    typer.echo(render.to_json(body))


def devices(as_json: AsJson = False, url: Url = DEFAULT_URL, token: Token = None) -> None:
    """Show the lanes (GPUs): their jobs, loaded models and telemetry."""
    with connect(url, token) as api:
        body = api.devices()
    console = _out()
    if as_json:
        typer.echo(render.to_json(body))
        return
    console.print(Text(f"runtime: {body.get('runtime', '?')}"))
    console.print(render.devices_table(body.get("devices", [])))


def _check_job_shape(
    training: bool,
    inputs: list[str] | None,
    files: list[Path] | None,
    dataset: str | None,
    gpus: int | None,
) -> None:
    """Mistakes `submit` can tell without asking the server."""
    if training:
        if inputs or files:
            raise typer.BadParameter(
                "a training job reads --dataset, not images", param_hint="--input/--file"
            )
        return
    if dataset is not None or gpus is not None:
        raise typer.BadParameter(
            "only training jobs take these; add --training", param_hint="--dataset/--gpus"
        )
    if inputs and files:
        raise typer.BadParameter(
            "give the images either on the server (--input) or local (--file)",
            param_hint="--input/--file",
        )
    if not inputs and not files:
        raise typer.BadParameter(
            "an inference job needs images: --input PATTERN or --file PATH",
            param_hint="--input/--file",
        )


def parse_params(pairs: list[str]) -> Json:
    """`KEY=VALUE` pairs; a VALUE that parses as JSON is taken as that (3, 0.5, true, [0, 2]),
    any other as a string."""
    params: Json = {}
    for pair in pairs:
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


def _follow(api: ApiClient, job_id: str, *, as_json: bool, quiet: bool) -> ExitCode:
    """Follow the job to its end; print the final state; the exit code for it."""
    final: Json | None = None
    with render.JobProgress(_err(), job_id, silent=quiet or as_json) as view:
        for job in follow_job(api, job_id):
            final = job
            view.update(job)
    if final is None:  # follow_job ends only with a terminal job or an error
        raise ApiError("the server never showed the job", "no_job", ExitCode.UNAVAILABLE)
    if as_json:
        typer.echo(render.to_json(final))
    elif not quiet:
        typer.echo(render.job_line(final))
    return ExitCode.for_state(final["state"])


@contextmanager
def connect(url: str, token: str | None) -> Iterator[ApiClient]:
    """A client for one command; a failed request ends the command with its exit code."""
    try:
        with ApiClient(url, token) as api:
            yield api
    except ApiError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(exc.exit_code) from None


def show(body: Json, as_json: bool, human: RenderableType) -> None:
    """The server's JSON, or the human view of it (a line, a table)."""
    if as_json:
        typer.echo(render.to_json(body))
    elif isinstance(human, str):
        typer.echo(human)
    else:
        _out().print(human)


_PIPE_WIDTH = 500


def _out() -> Console:
    console = Console(highlight=False)
    if not console.is_terminal:  # a pipe or a file: tables keep their natural width
        console = Console(highlight=False, width=_PIPE_WIDTH)
    return console


def submitted(api: ApiClient, job: Json, *, wait_: bool, quiet: bool, as_json: bool) -> None:
    """Print a job just submitted; with --wait, its end, then exit with its exit code."""
    if quiet:
        typer.echo(job["id"])
    elif not (as_json and wait_):
        show(job, as_json, f"submitted job {job['id']} ({job['state']})")
    if not wait_:
        return
    if job["state"] in TERMINAL_STATES:  # it ended while the server held the answer
        if as_json:
            typer.echo(render.to_json(job))
        elif not quiet:
            typer.echo(render.job_line(job))
        raise typer.Exit(ExitCode.for_state(job["state"]))
    raise typer.Exit(_follow(api, job["id"], as_json=as_json, quiet=quiet))


def _err() -> Console:
    return Console(stderr=True, highlight=False)
