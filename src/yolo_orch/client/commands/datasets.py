"""`yolo-orch datasets`: managed datasets (what capture fills and Label Studio annotates): list,
show, create, delete, download."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from yolo_orch.client.commands.common import AsJson, Token, Url, connect, out, show
from yolo_orch.client.datasets import DatasetPublic
from yolo_orch.client.help_text import PlainHelpGroup
from yolo_orch.client.render import to_json
from yolo_orch.client.wire import DEFAULT_URL

datasets_app = typer.Typer(
    help="Managed datasets: captured images and their labels, trained on as dataset:NAME.",
    no_args_is_help=True,
    cls=PlainHelpGroup,
)

Name = Annotated[
    str, typer.Argument(metavar="NAME", help="The dataset's name.", show_default=False)
]


@datasets_app.command("list")
def datasets_list(as_json: AsJson = False, url: Url = DEFAULT_URL, token: Token = None) -> None:
    """List the managed datasets with their items per split and source."""
    with connect(url, token) as client:
        found = client.datasets()
    if as_json:
        typer.echo(to_json({"datasets": [d.model_dump(mode="json") for d in found]}))
        return
    table = Table("name", "task", "classes", "train", "val", "model", "annotation")
    for dataset in found:
        table.add_row(
            dataset.name,
            dataset.task,
            str(len(dataset.names)),
            str(dataset.splits["train"].images),
            str(dataset.splits["val"].images),
            str(dataset.sources.get("model", 0)),
            str(dataset.sources.get("annotation", 0)),
        )
    out().print(table if found else "no datasets")


@datasets_app.command("show")
def datasets_show(
    name: Name, as_json: AsJson = False, url: Url = DEFAULT_URL, token: Token = None
) -> None:
    """A dataset's task, its counts per class and split, and its labelling settings."""
    with connect(url, token) as client:
        found = client.dataset(name)
    show(found, as_json, _counts_table(found))


@datasets_app.command("create")
def datasets_create(
    name: Name,
    task: Annotated[
        str,
        typer.Option(help="detect, segment, pose, obb or classify.", show_default=False),
    ],
    names: Annotated[
        list[str],
        typer.Option(
            "--class",
            "-c",
            metavar="NAME",
            help="A class name, in class id order. Repeatable.",
            show_default=False,
        ),
    ],
    kpt_shape: Annotated[
        tuple[int, int] | None,
        typer.Option(
            metavar="POINTS DIMS", help="Pose only: keypoints and 2 or 3.", show_default=False
        ),
    ] = None,
    as_json: AsJson = False,
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """Create an empty managed dataset. Needs a models:write token."""
    with connect(url, token) as client:
        created = client.create_dataset(name, task, names, kpt_shape=kpt_shape)
    show(created, as_json, f"created dataset {created.name} ({created.task}): {created.data}")


@datasets_app.command("delete")
def datasets_delete(name: Name, url: Url = DEFAULT_URL, token: Token = None) -> None:
    """Delete a dataset and all its files. Needs a models:write token."""
    with connect(url, token) as client:
        client.delete_dataset(name)
    typer.echo(f"deleted dataset {name}")


@datasets_app.command("download")
def datasets_download(
    name: Name,
    to: Annotated[
        Path,
        typer.Option("--to", "-o", help="A file, or a folder to put NAME.zip in."),
    ] = Path("."),
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """Download a dataset as a zip (it unpacks to a folder ultralytics trains on as it is)."""
    with connect(url, token) as client:
        written = client.download_dataset(name, to)
    typer.echo(str(written))


def _counts_table(dataset: DatasetPublic) -> Table:
    table = Table("class", "train", "val", title=f"{dataset.name} ({dataset.task}): {dataset.data}")
    for class_name in dataset.names:
        table.add_row(
            class_name,
            str(dataset.splits["train"].instances.get(class_name, 0)),
            str(dataset.splits["val"].instances.get(class_name, 0)),
        )
    table.add_row(
        "images",
        str(dataset.splits["train"].images),
        str(dataset.splits["val"].images),
        style="bold",
    )
    return table
