"""`yolo-orch validate`: score a registry model on a dataset on the server."""

from __future__ import annotations

import enum
from typing import Annotated

import typer

from yolo_orch.client import commands
from yolo_orch.client.http import DEFAULT_URL, Json


class Split(enum.StrEnum):
    val = "val"
    test = "test"


def validate(
    model: Annotated[
        str,
        typer.Option("--model", "-m", help="A registered model (name or id).", show_default=False),
    ],
    dataset: Annotated[
        str,
        typer.Option(
            help="A data.yaml on the server under a data root (an image folder for classify "
            "models).",
            show_default=False,
        ),
    ],
    split: Annotated[Split, typer.Option(help="The split to score.")] = Split.val,
    params: Annotated[
        list[str] | None,
        typer.Option(
            "--param",
            "-p",
            metavar="KEY=VALUE",
            help="imgsz, batch, conf or iou (imgsz=640). Repeatable.",
            show_default=False,
        ),
    ] = None,
    priority: commands.Priority = 0,
    idempotency_key: commands.IdempotencyKey = None,
    wait_: commands.WaitForEnd = False,
    quiet: commands.Quiet = False,
    as_json: commands.AsJson = False,
    url: commands.Url = DEFAULT_URL,
    token: commands.Token = None,
) -> None:
    """Submit a validation job: the model's metrics on the dataset's split (`result` prints
    them in full)."""
    body: Json = {
        "kind": "validation",
        "model": model,
        "dataset": dataset,
        "split": str(split),
        "params": commands.parse_params(params or []),
        "priority": priority,
    }
    with commands.connect(url, token) as api:
        job = api.submit(body, idempotency_key, commands.SUBMIT_WAIT_S if wait_ else None)
        commands.submitted(api, job, wait_=wait_, quiet=quiet, as_json=as_json)
