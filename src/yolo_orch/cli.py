"""The `yolo-orch` command: `serve` and `migrate`."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
import sys
from pathlib import Path
from types import FrameType

import uvicorn
from fastapi import FastAPI

from yolo_orch import __version__
from yolo_orch.api.deps import Services
from yolo_orch.app import create_app
from yolo_orch.config import MEMORY_DATABASE_URL, Settings, load_settings
from yolo_orch.errors import InstanceLocked, YoloOrchError
from yolo_orch.lock import InstanceLock

log = logging.getLogger("yolo_orch")


class DrainingServer(uvicorn.Server):
    """On the first SIGTERM/SIGINT: refuse new jobs (503) but keep answering polls while
    running jobs get `shutdown_grace_s` to finish; then stop. A second signal stops at once."""

    def __init__(self, app: FastAPI, settings: Settings) -> None:
        super().__init__(
            uvicorn.Config(
                app,
                host=settings.host,
                port=settings.port,
                log_config=None,
                timeout_graceful_shutdown=5,
            )
        )
        self._app = app
        self._settings = settings
        self._loop: asyncio.AbstractEventLoop | None = None
        self._draining = False
        self._drain_task: asyncio.Task[None] | None = None

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._draining or self._loop is None or not self.started:
            self.should_exit = True
            self.force_exit = self._draining
            return
        self._draining = True
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
        services.jobs.draining = True
        try:
            await services.dispatcher.drain(self._settings.shutdown_grace_s)
        finally:
            self.should_exit = True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="yolo-orch", description=__doc__)
    parser.add_argument("--version", action="version", version=f"yolo-orch {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the job server")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    migrate = commands.add_parser("migrate", help="bring the database schema to the newest")
    for command in (serve, migrate):
        command.add_argument("--config", type=Path, help="TOML file (or $YOLO_ORCH_CONFIG)")
    args = parser.parse_args(argv)

    overrides = {
        key: value for key in ("host", "port") if (value := getattr(args, key, None)) is not None
    }
    try:
        settings = load_settings(args.config, **overrides)
    except (OSError, ValueError) as exc:
        print(f"yolo-orch: invalid configuration: {exc}", file=sys.stderr)
        return 2
    _configure_logging(settings)
    if args.command == "migrate":
        return _migrate(settings)
    return _serve(settings)


def _serve(settings: Settings) -> int:
    try:  # fail fast with a clear message; the lifespan takes the lock for real
        probe = InstanceLock(settings.data_dir)
        probe.acquire()
        probe.release()
    except InstanceLocked as exc:
        print(f"yolo-orch: {exc}", file=sys.stderr)
        return 1
    app = create_app(settings)
    server = DrainingServer(app, settings)
    server.run()
    services: Services | None = getattr(app.state, "services", None)
    if services is not None and services.dispatcher.abandoned:
        # Worker threads of abandoned runs cannot be stopped; don't wait for them. Their jobs
        # stay RUNNING in the store and are requeued at the next start.
        logging.shutdown()
        os._exit(0)
    return 0


def _migrate(settings: Settings) -> int:
    from yolo_orch.store.migrate import current_revision, upgrade_to_head

    if settings.database_url == MEMORY_DATABASE_URL:
        print("yolo-orch: an in-memory database has no schema to migrate", file=sys.stderr)
        return 2
    try:
        upgrade_to_head(settings.sqlite_url)
    except YoloOrchError as exc:
        print(f"yolo-orch: {exc}", file=sys.stderr)
        return 1
    print(f"database at revision {current_revision(settings.sqlite_url)}")
    return 0


def _configure_logging(settings: Settings) -> None:
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


if __name__ == "__main__":
    sys.exit(main())
