"""The job service and the dispatcher know a kind only through the table, `kinds.KINDS`: a kind
whose entry is swapped for a throwaway one (its own submission checks, its own batching) runs by
that entry end to end on the simulated runtime, with no edit to the store, dispatcher or
service."""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from dataclasses import replace
from typing import Any, get_args

import pytest

from tests.conftest import serve, sim_job, wait_terminal
from yolo_orch.app import create_app
from yolo_orch.config import Settings
from yolo_orch.domain import Job, JobKind
from yolo_orch.domain.specs import ValidationSpec
from yolo_orch.errors import ErrorCode, InvalidJob
from yolo_orch.kinds import KINDS
from yolo_orch.kinds.submission import Submission, SubmissionChecks
from yolo_orch.runners.simulated import SimulatedRuntime


def test_the_table_has_every_kind_under_its_own_name() -> None:
    assert list(KINDS) == list(JobKind)
    assert all(kind.name is name for name, kind in KINDS.items())
    # each request body is told apart by its own kind's name
    assert [get_args(kind.request.model_fields["kind"].annotation) for kind in KINDS.values()] == [
        (str(name),) for name in JobKind
    ]


async def test_a_kind_runs_by_its_entry_in_the_table(
    settings_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked: list[ValidationSpec] = []

    async def throwaway_checks(
        submission: Submission[ValidationSpec], checks: SubmissionChecks
    ) -> ValidationSpec:
        if submission.spec.dataset == "refused/data.yaml":
            raise InvalidJob("the throwaway kind refuses it", code=ErrorCode.INVALID_DATASET)
        checked.append(submission.spec)
        return submission.spec

    def one_pass_per_model(job: Job) -> Hashable:
        return job.model

    throwaway = replace(
        KINDS[JobKind.VALIDATION], checked=throwaway_checks, batch_key=one_pass_per_model
    )
    monkeypatch.setitem(KINDS, JobKind.VALIDATION, throwaway)
    settings: Settings = settings_factory(sim_lanes=1, batch_max_images={"sim": 8})
    runtime = SimulatedRuntime(1)

    async with serve(create_app(settings, runtime=runtime)) as client:
        refused = await client.post(
            "/v1/jobs", json=_validation(dataset="refused/data.yaml", split="test")
        )
        assert refused.status_code == 422
        assert refused.json()["code"] == "invalid_dataset"

        blocker = (
            await client.post(
                "/v1/jobs", json=sim_job(params={"sim_seconds": 60, "sim_steps": 6000})
            )
        ).json()
        async with asyncio.timeout(10):
            while (await client.get(f"/v1/jobs/{blocker['id']}")).json()["state"] != "running":
                await asyncio.sleep(0.01)
        ids = []
        for split in ("val", "test", "val"):
            response = await client.post("/v1/jobs", json=_validation(split=split))
            assert response.status_code == 202, response.text
            ids.append(response.json()["id"])
        assert (await client.post(f"/v1/jobs/{blocker['id']}/cancel")).status_code == 202
        ended = [await wait_terminal(client, job_id) for job_id in ids]

    assert [job["state"] for job in ended] == ["succeeded"] * 3
    assert [job["result"]["split"] for job in ended] == ["val", "test", "val"]
    assert [spec.split for spec in checked] == ["val", "test", "val"]
    # Validation never shares a forward pass; the throwaway entry says its jobs of one model do.
    assert [set(record.job_ids) for record in runtime.batches] == [set(ids)]


def _validation(**fields: Any) -> dict[str, Any]:
    return {
        "kind": "validation",
        "model": "sim",
        "params": {"sim_seconds": 0.05, "sim_steps": 2},
        **fields,
    }
