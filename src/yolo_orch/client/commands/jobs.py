"""`yolo-orch status|wait|cancel|delete|list|result`: jobs once submitted."""

from __future__ import annotations

from typing import Annotated

import typer

from yolo_orch.client import render
from yolo_orch.client.commands.common import (
    AsJson,
    Token,
    Url,
    connect,
    follow,
    note,
    out,
    show,
)
from yolo_orch.client.errors import ExitCode
from yolo_orch.client.shapes import Job
from yolo_orch.client.wire import DEFAULT_URL
from yolo_orch.domain import JobKind, JobState

JobId = Annotated[str, typer.Argument(metavar="JOB", help="The job's id.", show_default=False)]


def status(
    job_id: JobId, as_json: AsJson = False, url: Url = DEFAULT_URL, token: Token = None
) -> None:
    """Show a job: state, progress, error. Exits 1 if it failed, 2 if it was cancelled."""
    with connect(url, token) as client:
        job = client.job(job_id)
    show(job, as_json, render.job_details(job))
    raise typer.Exit(ExitCode.for_state(job.state))


def wait(
    job_id: JobId,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Print nothing; see the exit code.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the final job as JSON.")] = False,
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """Follow a job until it ends, with a live progress bar, then summarise what it came to.

    Exits 0 if it succeeded, 1 if it failed, 2 if it was cancelled.
    """
    with connect(url, token) as client:
        raise typer.Exit(follow(client, job_id, as_json=as_json, quiet=quiet))


def cancel(
    job_id: JobId, as_json: AsJson = False, url: Url = DEFAULT_URL, token: Token = None
) -> None:
    """Cancel a job: a queued one at once, a running one at its next safe point."""
    with connect(url, token) as client:
        job = client.cancel(job_id)
    if job.state is JobState.CANCELLED:
        line = f"job {job_id} cancelled"
    else:
        line = f"cancel requested: job {job_id} stops at its next safe point"
    show(job, as_json, line)


def delete(job_id: JobId, url: Url = DEFAULT_URL, token: Token = None) -> None:
    """Delete a finished job's record and files (refused while it is queued or running; a
    model it produced stays registered)."""
    with connect(url, token) as client:
        client.delete(job_id)
    typer.echo(f"deleted job {job_id}")


def list_jobs(
    states: Annotated[
        list[JobState] | None,
        typer.Option(
            "--state",
            "-s",
            metavar="STATE",
            help=f"Only jobs in this state ({', '.join(JobState)}). Repeatable.",
            show_default=False,
        ),
    ] = None,
    kinds: Annotated[
        list[JobKind] | None,
        typer.Option(
            "--kind",
            "-k",
            metavar="KIND",
            help=f"Only jobs of this kind ({', '.join(JobKind)}). Repeatable.",
            show_default=False,
        ),
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=500, metavar="N", help="Jobs per page.")] = 20,
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
    jobs: list[Job] = []
    with connect(url, token) as client:
        while True:
            page = client.jobs(
                states=[str(s) for s in states or []],
                kinds=[str(k) for k in kinds or []],
                limit=limit,
                cursor=cursor,
            )
            jobs += page.jobs
            cursor = page.next_cursor
            if not all_pages or cursor is None:
                break
    if as_json:
        jobs_json = [job.model_dump(mode="json") for job in jobs]
        typer.echo(render.to_json({"jobs": jobs_json, "next_cursor": cursor}))
        return
    out().print(render.jobs_table(jobs) if jobs else "no jobs")
    if cursor is not None:
        note(f"more jobs: --all, or --cursor {cursor}")


def result(job_id: JobId, url: Url = DEFAULT_URL, token: Token = None) -> None:
    """Print the full result of a succeeded job (JSON)."""
    with connect(url, token) as client:
        detail = client.result_detail(job_id)
    typer.echo(render.to_json(detail.model_dump(mode="json", exclude_unset=True)))
