"""What a run on a Ray node leaves to the server, which alone writes the registry: the model a
training produced is registered from the job's folder once its files are back, and a model whose
file failed its fingerprint is marked unusable, as on one host."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import anyio.to_thread

from yolo_orch.dispatch.executor import Executor
from yolo_orch.domain import Job, JobResult, JsonObject
from yolo_orch.domain.views import model_view
from yolo_orch.errors import ModelTampered, YoloOrchError
from yolo_orch.files.jobfiles import ARTIFACTS_DIR
from yolo_orch.registry.models import ModelRegistry
from yolo_orch.registry.weights import sha256_file
from yolo_orch.runners.base import BatchOutcome, RunContext

PENDING = "registered_on_server"
"""The key of a produced model's view that the server has still to register."""


def pending_model(path: Path, name: str) -> JsonObject:
    """On the node: the view of a job artifact (`artifacts/best.pt`) to be registered as `name`
    on the server, standing where the model's registry view will be."""
    if path.parent.name != ARTIFACTS_DIR:
        raise RuntimeError(f"only a job's artifacts are registered from a node, not {path.name}")
    sha256 = hashlib.sha256(path.read_bytes()).hexdigest()
    return {"id": None, "name": name, PENDING: {"artifact": path.name, "sha256": sha256}}


class RegistersResults:
    """An executor on nodes, with the registry's part of each run done here."""

    def __init__(self, runs: Executor, registry: ModelRegistry) -> None:
        self._runs = runs
        self._registry = registry
        self.starts_unclaimed = runs.starts_unclaimed

    async def run(self, ctx: RunContext) -> JobResult:
        try:
            result = await self._runs.run(ctx)
        except YoloOrchError as exc:
            await self._retire_if_tampered(ctx, exc)
            raise
        return await self._registered(ctx, result)

    async def run_batch(self, ctxs: Sequence[RunContext]) -> list[BatchOutcome]:
        settled: list[BatchOutcome] = []
        for ctx, outcome in zip(ctxs, await self._runs.run_batch(ctxs), strict=True):
            if isinstance(outcome, YoloOrchError):
                await self._retire_if_tampered(ctx, outcome)
                settled.append(outcome)
            elif isinstance(outcome, JobResult):
                settled.append(await self._registered(ctx, outcome))
            else:
                settled.append(outcome)
        return settled

    async def surviving(self, jobs: Sequence[Job]) -> set[str]:
        return await self._runs.surviving(jobs)

    async def release(self, job_id: str) -> None:
        await self._runs.release(job_id)

    async def _retire_if_tampered(self, ctx: RunContext, error: YoloOrchError) -> None:
        """The node found the server's file changed since its import: never load it again (a
        variant's files: the variant is retired, its model stays usable, as on one host)."""
        if error.code != ModelTampered.code:
            return
        variant_id = getattr(error, "tampered_variant", None)  # `executor.NodeJobFailed`
        if isinstance(variant_id, str):
            reason = f"its files no longer match their fingerprints: {error.message}"
            await self._registry.variants.mark_unusable(variant_id, reason)
        elif ctx.job.model_id is not None:
            await self._registry.mark_unusable(ctx.job.model_id)

    async def _registered(self, ctx: RunContext, result: JobResult) -> JobResult:
        pending = result.detail.get("model")
        if not isinstance(pending, dict) or not isinstance(pending.get(PENDING), dict):
            return result
        handed: JsonObject = pending[PENDING]
        path = ctx.workdir / ARTIFACTS_DIR / Path(str(handed["artifact"])).name
        if await anyio.to_thread.run_sync(sha256_file, path) != handed["sha256"]:
            raise RuntimeError(f"the {path.name} the node produced did not come back whole")
        model = await self._registry.register_file(
            path, str(pending["name"]), f"training:{ctx.job.id}"
        )
        view = model_view(model)
        return JobResult(
            summary={**result.summary, "model_id": model.id},
            detail={**result.detail, "model": view},
        )
