"""`yolo-orch models`: import, list and delete the server's registered weights."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from yolo_orch.client import commands, render
from yolo_orch.client.commands import AsJson, Token, Url
from yolo_orch.client.http import DEFAULT_URL

models_app = typer.Typer(help="The weights registry.", no_args_is_help=True)


@models_app.command("import")
def models_import(
    source: Annotated[
        str,
        typer.Argument(
            metavar="PATH_OR_FILE",
            help="A local .pt file to upload, or with --server-path a path on the server, "
            "relative to a model root.",
            show_default=False,
        ),
    ],
    name: Annotated[
        str | None, typer.Option(help="Default: the file's stem.", show_default=False)
    ] = None,
    server_path: Annotated[
        bool, typer.Option("--server-path", help="PATH_OR_FILE is a path on the server.")
    ] = False,
    as_json: AsJson = False,
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """Import weights: fingerprinted and inspected without running code from them."""
    local = Path(source)
    if not server_path and not local.is_file():
        raise typer.BadParameter(
            f"{source} is not a local file (add --server-path for a path on the server)",
            param_hint="PATH_OR_FILE",
        )
    with commands.connect(url, token) as api:
        if server_path:
            model, created = api.import_model_path(source, name)
        else:
            model, created = api.import_model_file(local, name)
    line = ("imported " if created else "already registered: ") + render.model_line(model)
    commands.show(model, as_json, line)


@models_app.command("list")
def models_list(
    as_json: AsJson = False,
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """List the registered models, newest first."""
    with commands.connect(url, token) as api:
        body = api.models()
    models = body.get("models", [])
    commands.show(body, as_json, render.models_table(models) if models else "no models")


@models_app.command("delete")
def models_delete(
    ref: Annotated[str, typer.Argument(help="The model's id or name.", show_default=False)],
    cascade: Annotated[bool, typer.Option(help="Delete its exported variants too.")] = False,
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """Delete a model (refused while queued or running jobs use it, or while it has variants
    unless --cascade)."""
    with commands.connect(url, token) as api:
        api.delete_model(ref, cascade=cascade)
    typer.echo(f"deleted model {ref}")
