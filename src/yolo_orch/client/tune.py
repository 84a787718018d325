"""Tune jobs from Python: `Client` and `AsyncClient` inherit `tune` (`SyncTune`, `AsyncTune`).
A tune searches training params over many trainings (docs/tune.md); the server holds every
default and bound, so a param left as None here is the server's default."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol

from yolo_orch.client import wire
from yolo_orch.client.shapes import Job
from yolo_orch.client.wire import Json

__all__ = ["AsyncTune", "SyncTune", "parse_space", "tune_body"]


def tune_body(
    model: str,
    dataset: str | None,
    space: Mapping[str, Any],
    settings: Mapping[str, Any],
    priority: int,
) -> Json:
    """The `POST /v1/jobs` body of a tune job; settings given as None are left out."""
    params: Json = {"space": dict(space)}
    params |= {key: value for key, value in settings.items() if value is not None}
    return wire.job_body("tune", model, params, priority, dataset=dataset)


def parse_space(specs: list[str]) -> Json:
    """`NAME=LOW..HIGH[:log|:step=S]` (a range) or `NAME=A|B|C` (choices), as `--space` takes
    them, into the job's `space`. Numbers are read as JSON (0.01, 8), anything else as text;
    the server checks names, ranges and values."""
    space: Json = {}
    for spec in specs:
        name, sep, rest = spec.partition("=")
        name = name.strip()
        if not sep or not name or not rest:
            raise ValueError(f"{spec!r} is not NAME=LOW..HIGH or NAME=A|B")
        if ".." in rest:
            space[name] = _range(spec, rest)
        else:
            space[name] = {"choices": [_scalar(choice) for choice in rest.split("|")]}
    return space


def _range(spec: str, rest: str) -> Json:
    bounds, _, option = rest.partition(":")
    low, _, high = bounds.partition("..")
    found: Json = {"low": _scalar(low), "high": _scalar(high)}
    if option == "log":
        found["log"] = True
    elif option.startswith("step="):
        found["step"] = _scalar(option.removeprefix("step="))
    elif option:
        raise ValueError(f"{spec!r}: after the range, ':log' or ':step=S', not {option!r}")
    return found


def _scalar(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text.strip()


class _SyncSubmit(Protocol):
    def submit_job(
        self, body: Json, *, idempotency_key: str | None = None, wait_s: float | None = None
    ) -> Job: ...


class _AsyncSubmit(Protocol):
    async def submit_job(
        self, body: Json, *, idempotency_key: str | None = None, wait_s: float | None = None
    ) -> Job: ...


class SyncTune:
    """`Client`'s tune method."""

    def tune(
        self: _SyncSubmit,
        model: str,
        dataset: str | None,
        space: Mapping[str, Any],
        *,
        trials: int | None = None,
        parallel: int | None = None,
        epochs: int | None = None,
        objective: str | None = None,
        pruner: str | None = None,
        seed: int | None = None,
        base: Json | None = None,
        priority: int = 0,
        idempotency_key: str | None = None,
        wait_s: float | None = None,
    ) -> Job:
        """A tune job: trainings of `model` on `dataset` with params drawn from `space`
        (`{"lr0": {"low": 1e-4, "high": 0.1, "log": True}, "optimizer": {"choices": [...]}}`),
        `parallel` at once; its result lists the trials and the best."""
        settings: dict[str, Any] = {"trials": trials, "parallel": parallel, "epochs": epochs}
        settings |= {"objective": objective, "pruner": pruner, "seed": seed, "base": base}
        body = tune_body(model, dataset, space, settings, priority)
        return self.submit_job(body, idempotency_key=idempotency_key, wait_s=wait_s)


class AsyncTune:
    """`AsyncClient`'s tune method."""

    async def tune(
        self: _AsyncSubmit,
        model: str,
        dataset: str | None,
        space: Mapping[str, Any],
        *,
        trials: int | None = None,
        parallel: int | None = None,
        epochs: int | None = None,
        objective: str | None = None,
        pruner: str | None = None,
        seed: int | None = None,
        base: Json | None = None,
        priority: int = 0,
        idempotency_key: str | None = None,
        wait_s: float | None = None,
    ) -> Job:
        """As `Client.tune`."""
        settings: dict[str, Any] = {"trials": trials, "parallel": parallel, "epochs": epochs}
        settings |= {"objective": objective, "pruner": pruner, "seed": seed, "base": base}
        body = tune_body(model, dataset, space, settings, priority)
        return await self.submit_job(body, idempotency_key=idempotency_key, wait_s=wait_s)
