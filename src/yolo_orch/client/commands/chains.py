"""`yolo-orch chain`: a training's chain (`then`), its steps in order, and its cancel."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from yolo_orch.client.commands.common import AsJson, Token, Url, connect, show
from yolo_orch.client.errors import ExitCode
from yolo_orch.client.shapes import Chain
from yolo_orch.client.wire import DEFAULT_URL
from yolo_orch.domain import JobState

ChainId = Annotated[
    str, typer.Argument(metavar="CHAIN", help="The chain's id: its training's job id.")
]


def chain(
    chain_id: ChainId,
    cancel: Annotated[
        bool, typer.Option("--cancel", help="Cancel every step that has not ended.")
    ] = False,
    as_json: AsJson = False,
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """Show a chain's steps (training, validation, exports, promotion) and whether it promoted.

    Exits 0 once it succeeded, 1 if a step failed, 2 if it was cancelled, else 0.
    """
    with connect(url, token) as client:
        found = client.cancel_chain(chain_id) if cancel else client.chain(chain_id)
    show(found, as_json, steps_table(found))
    if found.state in ("failed", "cancelled"):
        raise typer.Exit(ExitCode.for_state(JobState(found.state)))


def steps_table(found: Chain) -> Table:
    promoted = {True: "promoted", False: "not promoted", None: ""}[found.promoted]
    table = Table(title=f"chain {found.id}: {found.state} {promoted}".rstrip())
    for column in ("step", "state", "model", "id", "outcome"):
        table.add_column(column)
    for step in found.steps:
        table.add_row(step.kind, step.state, step.model, step.id, _outcome(step.result, step.error))
    return table


def _outcome(result: dict[str, object] | None, error: object) -> str:
    if error is not None:
        return str(getattr(error, "code", ""))
    if result is None:
        return ""
    if "promoted" in result:
        return str(result.get("reason") or f"moved to {result.get('to_model_id')}")
    metrics = result.get("metrics")
    if isinstance(metrics, dict):
        return ", ".join(f"{k} {v}" for k, v in list(metrics.items())[:4])
    return ""
