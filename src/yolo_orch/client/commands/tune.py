"""`yolo-orch tune`: a search over training params, its trials run on the lanes at once."""

from __future__ import annotations

from typing import Annotated

import typer

from yolo_orch.client.commands.common import (
    SUBMIT_WAIT_S,
    AsJson,
    IdempotencyKey,
    Priority,
    Quiet,
    Token,
    Url,
    WaitForEnd,
    connect,
    parse_params,
    submitted,
)
from yolo_orch.client.tune import parse_space
from yolo_orch.client.wire import DEFAULT_URL


def tune(
    model: Annotated[
        str,
        typer.Option(
            "--model",
            "-m",
            metavar="MODEL",
            help="A registered model to fine-tune, or an architecture such as yolo11n.yaml.",
            show_default=False,
        ),
    ],
    space: Annotated[
        list[str],
        typer.Option(
            "--space",
            "-s",
            metavar="NAME=LOW..HIGH[:log|:step=S] | NAME=A|B",
            help="A searched training param: a range (lr0=0.0005..0.05:log, "
            "batch=8..32:step=8) or choices (optimizer='SGD|AdamW'). Repeatable.",
            show_default=False,
        ),
    ],
    dataset: Annotated[
        str | None,
        typer.Option(
            metavar="DATA_YAML",
            help="A data.yaml on the server under a data root, or dataset:<name> (as a "
            "training's: the simulated runtime needs none).",
            show_default=False,
        ),
    ] = None,
    trials: Annotated[
        int | None, typer.Option(help="Trials in all (server default: 20).", show_default=False)
    ] = None,
    parallel: Annotated[
        int | None,
        typer.Option(help="Trials at once (server default: its lanes).", show_default=False),
    ] = None,
    epochs: Annotated[
        int | None, typer.Option(help="Each trial's epochs (server default: 10).")
    ] = None,
    objective: Annotated[
        str | None,
        typer.Option(help="The score to maximize: mAP50-95, mAP50, top1, ...", show_default=False),
    ] = None,
    pruner: Annotated[
        str | None,
        typer.Option(help="median, successive_halving or none (server default: median)."),
    ] = None,
    seed: Annotated[int | None, typer.Option(help="The sampler's seed.")] = None,
    base: Annotated[
        list[str] | None,
        typer.Option(
            "--base",
            "-p",
            metavar="KEY=VALUE",
            help="A training param every trial gets (imgsz=128). Repeatable.",
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
    """Submit a tune job: trainings with params drawn from --space (Optuna's TPE, pruned by
    their per-epoch scores); `result` lists the trials, the summary gives the best."""
    try:
        searched = parse_space(space)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--space") from None
    with connect(url, token) as client:
        job = client.tune(
            model,
            dataset,
            searched,
            trials=trials,
            parallel=parallel,
            epochs=epochs,
            objective=objective,
            pruner=pruner,
            seed=seed,
            base=parse_params(base) or None,
            priority=priority,
            idempotency_key=idempotency_key,
            wait_s=SUBMIT_WAIT_S if wait_ else None,
        )
        submitted(client, job, wait_=wait_, quiet=quiet, as_json=as_json)
