"""The `yolo-orch` command: the job server and a client of its HTTP API.

Server:  serve, migrate, token create
Client:  submit, validate, export, status, wait, cancel, delete, list, result,
         models import|list|download|delete, variants import|list|delete, devices
         (`--url` or $YOLO_ORCH_URL, default http://127.0.0.1:8000; `--token` or $YOLO_ORCH_TOKEN,
         sent as `Authorization: Bearer`; `--json` prints the server's JSON for scripts)

Exit codes of the client commands (`yolo_orch.client.ExitCode`):
  0  success
  1  the job failed (wait, status, submit/validate/export --wait)
  2  the job was cancelled (wait, status, submit/validate/export --wait)
  3  bad command line, or input the server refused (any other 4xx)
  4  no such job, model or route (404)
  5  server busy, draining or unreachable (429, 503, 5xx, no connection)
  6  missing, wrong or insufficient token (401, 403)

`serve` exits 0 after a drain, 1 when another server holds the data directory, 2 on an invalid
configuration; `migrate` exits 1 when the migration fails.
"""

from __future__ import annotations

import asyncio
import enum
import gc
import hashlib
import json
import logging
import os
import secrets
import signal
import socket
import sys
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any

import typer
import uvicorn

from yolo_orch import __version__
from yolo_orch.client.commands import register
from yolo_orch.client.errors import ExitCode, exit_codes_help
from yolo_orch.client.help_text import PlainHelpGroup
from yolo_orch.ops.sdnotify import Notifier

if TYPE_CHECKING:  # the client commands start without the server's imports
    from fastapi import FastAPI

    from yolo_orch.api.banner import OpenFiles
    from yolo_orch.api.connections import ConnectionBook
    from yolo_orch.api.deps import Services
    from yolo_orch.config import Settings

log = logging.getLogger("yolo_orch")


EXIT_CUDA_FATAL = 75
"""`serve`'s exit status after a sticky CUDA error: systemd restarts it (Restart=on-failure)."""
EXIT_WEDGED = 76
"""`serve`'s exit status once a job's thread ignored a stop and the other jobs ended: its lanes
come back only with a new process, so systemd restarts it."""
EXIT_LEASE_LOST = 77
"""`serve`'s exit status once this head has lost its lease to another (PostgreSQL): systemd
starts it again, as a standby."""


class DrainingServer(uvicorn.Server):
    """On the first SIGTERM/SIGINT: refuse new jobs (503) but keep answering polls while
    running jobs get `shutdown_grace_s` to finish; then answer held waits, end event streams and
    stop. A second signal stops at once."""

    def __init__(
        self,
        app: FastAPI,
        settings: Settings,
        connections: ConnectionBook,
        open_files: OpenFiles,
    ) -> None:
        from yolo_orch.api.protocol import problem_http_protocol

        super().__init__(
            uvicorn.Config(
                app,
                host=settings.host,
                port=settings.port,
                log_config=None,
                timeout_graceful_shutdown=5,  # the last resort: the drain ends what it holds
                # httptools and uvloop (uvicorn[standard]), with problem JSON for the
                # requests uvicorn cannot parse
                http=problem_http_protocol(
                    settings.max_header_bytes, settings.header_timeout_s, connections
                ),
                loop="uvloop",
            )
        )
        self._app = app
        self._settings = settings
        self._open_files = open_files
        self._loop: asyncio.AbstractEventLoop | None = None
        self._draining = False
        self._drain_task: asyncio.Task[None] | None = None
        from yolo_orch.config import service_manager_environment

        self._notifier = Notifier.from_environ(service_manager_environment())
        self._fatal_watch: asyncio.Task[None] | None = None
        self._wedged_watch: asyncio.Task[None] | None = None
        self._lease_watch: asyncio.Task[None] | None = None
        self.exit_code = 0

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        # Pings come from the event loop itself: if the loop wedges they stop, and systemd
        # (WatchdogSec) restarts the service.
        watchdog = asyncio.create_task(self._notifier.watchdog_loop(), name="sd-watchdog")
        try:
            await super().serve(sockets)
        finally:
            watchdog.cancel()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            # What start-up made (modules, schemas, torch) lives as long as the process: out
            # of the collector's way, so a full collection under load walks only new objects.
            gc.freeze()
            self._notifier.ready(f"serving on {self._settings.host}:{self._settings.port}")
            self._log_banner()
            self._fatal_watch = asyncio.create_task(self._exit_when_poisoned())
            self._wedged_watch = asyncio.create_task(self._exit_when_wedged())
            if self._app.state.services.leadership is not None:
                self._lease_watch = asyncio.create_task(self._exit_when_lease_lost())

    def _log_banner(self) -> None:
        """Once listening, so that its URLs name the port really bound (`port = 0` too)."""
        from yolo_orch.api.banner import base_url, startup_banner

        ports = [sock.getsockname()[1] for server in self.servers for sock in server.sockets]
        url = base_url(self._settings.host, ports[0] if ports else self._settings.port)
        log.info(startup_banner(self._app.state.services, url, self._open_files))

    async def _exit_when_poisoned(self) -> None:
        services: Services = self._app.state.services
        await services.dispatcher.fatal.wait()
        self.exit_code = EXIT_CUDA_FATAL
        self._notifier.stopping("a fatal CUDA error: restarting")
        services.jobs.stopped.set()  # held waits answer, streams end, before uvicorn cuts them
        self.should_exit = True

    async def _exit_when_wedged(self) -> None:
        services: Services = self._app.state.services
        await services.dispatcher.wedged.wait()
        self.exit_code = EXIT_WEDGED
        self._notifier.stopping("a job's thread is wedged: restarting")
        services.jobs.stopped.set()  # held waits answer, streams end, before uvicorn cuts them
        self.should_exit = True

    async def _exit_when_lease_lost(self) -> None:
        """At once, without a drain: another head runs the jobs now, and this one's writes are
        fenced off; what it was running the other recovers."""
        services: Services = self._app.state.services
        assert services.leadership is not None
        await services.leadership.lost.wait()
        self._notifier.stopping("this head lost its lease to another: restarting as a standby")
        logging.shutdown()
        os._exit(EXIT_LEASE_LOST)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._draining or self._loop is None or not self.started:
            self.should_exit = True
            self.force_exit = self._draining
            return
        self._draining = True
        # Refuse new jobs from now on, not from the drain task's first step: under uvloop a
        # request read in the same turn of the loop would run before it.
        services: Services = self._app.state.services
        services.jobs.draining = True
        self._notifier.stopping(f"draining for up to {self._settings.shutdown_grace_s}s")
        log.info(
            "signal %s: draining for up to %ss",
            signal.Signals(sig).name,
            self._settings.shutdown_grace_s,
        )
        self._loop.call_soon_threadsafe(self._begin_drain)

    def _begin_drain(self) -> None:
        self._drain_task = asyncio.create_task(self._drain())  # kept: the loop holds weak refs

    async def _drain(self) -> None:
        services: Services = self._app.state.services
        try:
            # Ends by answering held waits and ending event streams: all done before uvicorn's
            # graceful-shutdown timeout (the last resort) would cancel them mid-answer.
            await services.jobs.drain(self._settings.shutdown_grace_s)
        finally:
            self.should_exit = True


class _Commands(PlainHelpGroup):
    """Command-line mistakes exit with `ExitCode.USAGE`: the parser's own 2 would read as "job
    cancelled"."""

    # The parser's context types are typer-internal; `Any` keeps these overrides compatible.
    def make_context(
        self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any
    ) -> Any:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except typer.TyperException as exc:
            _exit_as_usage(exc)
            raise

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except typer.TyperException as exc:
            _exit_as_usage(exc)
            raise


_PARSER_USAGE_EXIT = 2  # what the parser's usage errors (bad option, missing argument) exit with


def _exit_as_usage(exc: typer.TyperException) -> None:
    if exc.exit_code == _PARSER_USAGE_EXIT:
        exc.exit_code = ExitCode.USAGE


app = typer.Typer(
    name="yolo-orch",
    cls=_Commands,
    help="A job server for YOLO inference and training, and a client of its HTTP API.",
    epilog="Exit codes of the client commands:\n" + exit_codes_help(),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,  # locals would show the bearer token
    context_settings={"help_option_names": ["-h", "--help"]},
)
register(app)

ConfigFile = Annotated[
    Path | None,
    typer.Option("--config", help="TOML settings file (or $YOLO_ORCH_CONFIG).", show_default=False),
]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"yolo-orch {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    pass


@app.command(rich_help_panel="Server")
def serve(
    config: ConfigFile = None,
    host: Annotated[str | None, typer.Option(help="Listen here.", show_default=False)] = None,
    port: Annotated[int | None, typer.Option(help="Listen here.", show_default=False)] = None,
) -> None:
    """Run the job server. SIGTERM/SIGINT drain it: running jobs get `shutdown_grace_s`."""
    overrides = {key: value for key, value in (("host", host), ("port", port)) if value is not None}
    raise typer.Exit(_serve(_settings(config, **overrides)))


@app.command(rich_help_panel="Server")
def migrate(config: ConfigFile = None) -> None:
    """Bring the database schema to the newest."""
    raise typer.Exit(_migrate(_settings(config)))


@app.command(rich_help_panel="Server")
def demo(
    directory: Annotated[
        Path, typer.Option("--dir", help="The demo's folder: its dataset and server data.")
    ] = Path("demo"),
    url: Annotated[
        str | None,
        typer.Option(help="Use this server instead of starting one (--dir: a data root of it)."),
    ] = None,
    token: Annotated[str | None, typer.Option(help="Bearer token for --url.")] = None,
    keep_serving: Annotated[
        bool, typer.Option("--keep-serving", help="Keep the demo's server running until Ctrl-C.")
    ] = False,
    epochs: Annotated[
        int | None, typer.Option(min=1, max=10, help="Training epochs.", show_default="6")
    ] = None,
    imgsz: Annotated[
        int | None,
        typer.Option(min=32, max=640, help="Image size (a multiple of 32).", show_default="128"),
    ] = None,
    train_images: Annotated[
        int | None, typer.Option(min=3, help="Generated training images.", show_default="600")
    ] = None,
) -> None:
    """Train, validate, export and run a detector on generated shapes, offline, in minutes."""
    import importlib.util

    if importlib.util.find_spec("ultralytics") is None:  # it brings numpy, which the demo uses
        typer.echo("yolo-orch demo needs the runtime: pip install 'yolo-orch[yolo]'", err=True)
        raise typer.Exit(ExitCode.USAGE)
    from yolo_orch.demo.run import DemoPlan
    from yolo_orch.demo.run import main as run_demo

    plan = DemoPlan(root=directory, url=url, token=token, keep_serving=keep_serving)
    raise typer.Exit(run_demo(plan.scaled(epochs, imgsz, train_images)))


token_app = typer.Typer(help="Bearer tokens for the server's `tokens` setting.")
app.add_typer(token_app, name="token", rich_help_panel="Server")


class Scope(enum.StrEnum):
    jobs = "jobs"
    models_write = "models:write"
    labelling = "labelling"
    admin = "admin"


@token_app.command("create")
def token_create(
    scope: Annotated[Scope, typer.Option(help="What the token may do.")] = Scope.jobs,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print {token, sha256, scope} as JSON.")
    ] = False,
) -> None:
    """Make a new random bearer token. It is printed once; the server keeps only its SHA-256."""
    token = secrets.token_urlsafe(32)
    digest = hashlib.sha256(token.encode()).hexdigest()
    if as_json:
        typer.echo(json.dumps({"token": token, "sha256": digest, "scope": scope.value}))
        return
    entry = f'{{ sha256 = "{digest}", scope = "{scope.value}" }}'
    typer.echo(
        "New bearer token (shown only this once; clients send it as "
        "`Authorization: Bearer <token>`, or set YOLO_ORCH_TOKEN):\n\n"
        f"    {token}\n\n"
        "Add this entry to the `tokens` array of the server's config file, then restart it:\n\n"
        f"    {entry}\n\n"
        "for example:\n\n"
        "    tokens = [\n"
        f"        {entry},\n"
        "    ]"
    )


def main(argv: list[str] | None = None) -> int:
    """Run the command line with `argv` (default: `sys.argv[1:]`); the exit code."""
    try:
        app(args=argv, prog_name="yolo-orch")
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        raise
    return 0


def _settings(config: Path | None, **overrides: Any) -> Settings:
    from pydantic import ValidationError

    from yolo_orch.config import load_settings
    from yolo_orch.setting_hints import describe_invalid

    try:
        settings = load_settings(config, **overrides)
    except ValidationError as exc:
        print(f"yolo-orch: invalid configuration:\n  {describe_invalid(exc)}", file=sys.stderr)
        raise typer.Exit(2) from None
    except (OSError, ValueError) as exc:
        print(f"yolo-orch: invalid configuration: {exc}", file=sys.stderr)
        raise typer.Exit(2) from None
    _configure_logging(settings)
    return settings


def _serve(settings: Settings) -> int:
    from yolo_orch.api.banner import OpenFiles
    from yolo_orch.api.connections import ConnectionBook, connection_limit
    from yolo_orch.app import create_app
    from yolo_orch.config import MEMORY_DATABASE_URL
    from yolo_orch.errors import InstanceLocked
    from yolo_orch.ops.fd_limit import raise_open_files_limit
    from yolo_orch.ops.lock import InstanceLock
    from yolo_orch.runners.heap import keep_freed_memory
    from yolo_orch.store.migrate import unreachable

    keep_freed_memory(settings.heap_retain_mb << 20)  # before any thread of the server starts
    try:  # fail fast with a clear message; the lifespan takes the lock for real
        probe = InstanceLock(settings.lock_files)
        probe.acquire()
        probe.release()
    except InstanceLocked as exc:
        print(f"yolo-orch: {exc}", file=sys.stderr)
        return 1
    if settings.database_url != MEMORY_DATABASE_URL and (
        problem := unreachable(settings.store_url)
    ):
        print(f"yolo-orch: {problem}", file=sys.stderr)
        return 1
    soft, hard = raise_open_files_limit()
    connections = ConnectionBook(
        connection_limit(soft, settings.max_connections), settings.max_held_requests
    )
    app = create_app(settings, connections=connections)
    server = DrainingServer(app, settings, connections, OpenFiles(soft, hard, connections.limit))
    server.run()
    services: Services | None = getattr(app.state, "services", None)
    if server.exit_code or (services is not None and services.dispatcher.abandoned):
        # Worker threads of abandoned runs (or stuck in a failed CUDA context) cannot be
        # stopped; don't wait for them. Recovery settles their jobs at the next start.
        logging.shutdown()
        os._exit(server.exit_code)
    return 0


def _migrate(settings: Settings) -> int:
    from yolo_orch.config import MEMORY_DATABASE_URL
    from yolo_orch.store.migrate import current_revision, upgrade_to_head

    if settings.database_url == MEMORY_DATABASE_URL:
        print("yolo-orch: an in-memory database has no schema to migrate", file=sys.stderr)
        return 2
    try:
        upgrade_to_head(settings.store_url)
    except Exception as exc:  # alembic's and the database's errors, said plainly
        print(f"yolo-orch: migration failed: {exc}", file=sys.stderr)
        return 1
    print(f"database at revision {current_revision(settings.store_url)}")
    return 0


def _configure_logging(settings: Settings) -> None:
    from yolo_orch.ops.logs import configure_logging

    configure_logging(settings.log_level, json_lines=settings.log_format == "json")


if __name__ == "__main__":
    sys.exit(main())
