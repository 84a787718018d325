"""`yolo-orch models` and `yolo-orch variants`: the server's weights and their exported
variants: import, list, download, delete."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from yolo_orch.client import render
from yolo_orch.client.commands.common import AsJson, ModelRef, Token, Url, connect, out, show
from yolo_orch.client.help_text import PlainHelpGroup
from yolo_orch.client.wire import DEFAULT_URL

models_app = typer.Typer(help="The weights registry.", no_args_is_help=True, cls=PlainHelpGroup)
variants_app = typer.Typer(
    help="A model's exported variants (ONNX, OpenVINO, ...).",
    no_args_is_help=True,
    cls=PlainHelpGroup,
)

OnServer = Annotated[
    bool, typer.Option("--server-path", help="PATH_OR_FILE is a path on the server.")
]
VariantId = Annotated[
    str, typer.Argument(metavar="VARIANT", help="The variant's id.", show_default=False)
]


def _local_file(source: str) -> Path:
    local = Path(source)
    if not local.is_file():
        raise typer.BadParameter(
            f"{source} is not a local file (add --server-path for a path on the server)",
            param_hint="PATH_OR_FILE",
        )
    return local


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
        str | None,
        typer.Option(metavar="NAME", help="Default: the file's stem.", show_default=False),
    ] = None,
    server_path: OnServer = False,
    as_json: AsJson = False,
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """Import weights: fingerprinted and inspected without running code from them."""
    path = source if server_path else _local_file(source)
    with connect(url, token) as client:
        model, created = client.import_model(path, name=name, on_server=server_path)
    line = ("imported " if created else "already registered: ") + render.model_line(model)
    show(model, as_json, line)


@models_app.command("list")
def models_list(as_json: AsJson = False, url: Url = DEFAULT_URL, token: Token = None) -> None:
    """List the registered models, newest first."""
    with connect(url, token) as client:
        models = client.models()
    if as_json:
        typer.echo(render.to_json({"models": [m.model_dump(mode="json") for m in models]}))
        return
    out().print(render.models_table(models) if models else "no models")


@models_app.command("delete")
def models_delete(
    ref: ModelRef,
    cascade: Annotated[bool, typer.Option(help="Delete its exported variants too.")] = False,
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """Delete a model (refused while queued or running jobs use it, or while it has variants
    unless --cascade)."""
    with connect(url, token) as client:
        client.delete_model(ref, cascade=cascade)
    typer.echo(f"deleted model {ref}")


@models_app.command("download")
def models_download(
    ref: ModelRef,
    to: Annotated[
        Path,
        typer.Argument(
            metavar="TO",
            help="A file to write, or a folder to put it in (default: this one).",
            show_default=False,
        ),
    ] = Path(),
    variant: Annotated[
        str | None,
        typer.Option(
            metavar="VARIANT",
            help="A variant's file instead (an OpenVINO model as a zip of its folder).",
            show_default=False,
        ),
    ] = None,
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """Download a model's .pt, or one of its variants, streamed to a file."""
    with connect(url, token) as client:
        if variant is None:
            written = client.download_model(ref, to)
        else:
            written = client.download_variant(ref, variant, to)
    typer.echo(f"wrote {written} ({render.size(written.stat().st_size)})")


@variants_app.command("import")
def variants_import(
    ref: ModelRef,
    source: Annotated[
        str,
        typer.Argument(
            metavar="PATH_OR_FILE",
            help="A local .onnx file or zip of an OpenVINO model, or with --server-path an "
            ".onnx file or OpenVINO folder on the server, relative to a model root.",
            show_default=False,
        ),
    ],
    server_path: OnServer = False,
    as_json: AsJson = False,
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """Import an exported variant of a model; the server checks that it reproduces the
    model's outputs before it keeps it."""
    path = source if server_path else _local_file(source)
    with connect(url, token) as client:
        variant, created = client.import_variant(ref, path, on_server=server_path)
    line = ("imported " if created else "already registered: ") + render.variant_line(variant)
    show(variant, as_json, line)


@variants_app.command("list")
def variants_list(
    ref: ModelRef, as_json: AsJson = False, url: Url = DEFAULT_URL, token: Token = None
) -> None:
    """List a model's variants, newest first."""
    with connect(url, token) as client:
        variants = client.variants(ref)
    if as_json:
        typer.echo(render.to_json({"variants": [v.model_dump(mode="json") for v in variants]}))
        return
    out().print(render.variants_table(variants) if variants else f"{ref} has no variants")


@variants_app.command("delete")
def variants_delete(
    ref: ModelRef, variant_id: VariantId, url: Url = DEFAULT_URL, token: Token = None
) -> None:
    """Delete one of a model's variants."""
    with connect(url, token) as client:
        client.delete_variant(ref, variant_id)
    typer.echo(f"deleted variant {variant_id} of {ref}")
