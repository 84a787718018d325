"""What a submission does not do: make the job's folder (that waits for the job's start) or ask
the runtime again about a model it has already answered for."""

from __future__ import annotations

from collections.abc import Callable

from tests.conftest import serve, sim_job, wait_terminal
from tests.support.problems import wait_state
from yolo_orch.app import create_app
from yolo_orch.config import Settings
from yolo_orch.domain import JobKind
from yolo_orch.runners.simulated import SimulatedRuntime


class CountingRuntime(SimulatedRuntime):
    def __init__(self, lanes: int) -> None:
        super().__init__(lanes)
        self.asked: list[tuple[str, JobKind]] = []

    def provides(self, model: str, kind: JobKind) -> bool:
        self.asked.append((model, kind))
        return super().provides(model, kind)


async def test_a_queued_job_has_no_folder_until_it_starts(
    settings_factory: Callable[..., Settings],
) -> None:
    settings = settings_factory(sim_lanes=1)
    async with serve(create_app(settings)) as client:
        running = (
            await client.post(
                "/v1/jobs", json=sim_job(params={"sim_seconds": 60, "sim_steps": 600})
            )
        ).json()
        await wait_state(client, running["id"], "running")
        queued = (await client.post("/v1/jobs", json=sim_job())).json()
        assert (settings.jobs_dir / running["id"]).is_dir()
        assert not (settings.jobs_dir / queued["id"]).exists()

        await client.post(f"/v1/jobs/{running['id']}/cancel")
        assert (await wait_terminal(client, queued["id"]))["state"] == "succeeded"
        log = (await client.get(f"/v1/jobs/{queued['id']}/logs")).text
        assert log.index("queued") < log.index("started on sim:")


async def test_the_runtime_is_asked_about_a_model_name_once(
    settings_factory: Callable[..., Settings],
) -> None:
    runtime = CountingRuntime(2)
    async with serve(create_app(settings_factory(), runtime=runtime)) as client:
        for _ in range(3):
            assert (await client.post("/v1/jobs", json=sim_job())).status_code == 202
        unknown = {"kind": "inference", "model": "nosuch", "inputs": ["a.jpg"]}
        for _ in range(2):
            assert (await client.post("/v1/jobs", json=unknown)).status_code == 404
    assert runtime.asked == [("sim", JobKind.INFERENCE), ("nosuch", JobKind.INFERENCE)]
