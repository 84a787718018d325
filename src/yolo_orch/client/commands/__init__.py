"""The client commands of `yolo-orch`, each a request or a few to a running server over HTTP
(`--url`, `--token`) through `yolo_orch.client.Client`."""

from __future__ import annotations

import typer

from yolo_orch.client import render
from yolo_orch.client.commands import chains, jobs, streams, submit, tune
from yolo_orch.client.commands.aliases import alias_app
from yolo_orch.client.commands.common import AsJson, Token, Url, connect, out
from yolo_orch.client.commands.datasets import datasets_app
from yolo_orch.client.commands.registry import models_app, variants_app
from yolo_orch.client.wire import DEFAULT_URL


def register(app: typer.Typer) -> None:
    for name, command in (
        ("submit", submit.submit),
        ("validate", submit.validate),
        ("export", submit.export),
        ("tune", tune.tune),
        ("status", jobs.status),
        ("wait", jobs.wait),
        ("cancel", jobs.cancel),
        ("delete", jobs.delete),
        ("list", jobs.list_jobs),
        ("result", jobs.result),
        ("chain", chains.chain),
    ):
        app.command(name, rich_help_panel="Jobs")(command)
    app.command("stream", rich_help_panel="Streams")(streams.stream)
    app.command("frames", rich_help_panel="Streams")(streams.frames)
    app.command("snapshot", rich_help_panel="Streams")(streams.snapshot)
    app.add_typer(models_app, name="models", rich_help_panel="Host")
    app.add_typer(variants_app, name="variants", rich_help_panel="Host")
    app.add_typer(alias_app, name="alias", rich_help_panel="Host")
    app.add_typer(datasets_app, name="datasets", rich_help_panel="Host")
    app.command(rich_help_panel="Host")(devices)


def devices(as_json: AsJson = False, url: Url = DEFAULT_URL, token: Token = None) -> None:
    """Show the lanes (GPUs): their jobs, loaded models, memory, load and temperature."""
    with connect(url, token) as client:
        found = client.devices()
    if as_json:
        typer.echo(render.to_json(found))
        return
    console = out()
    console.print(f"runtime: {found.runtime}")
    console.print(render.devices_table(found))
