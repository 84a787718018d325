"""SIGKILL mid-stream, restart, then check the queue like Jepsen's total-queue checker: every
acknowledged job exists and ends, nothing appears that no client may have submitted, and no job
runs to success twice in one attempt. On SQLite (the default) and on PostgreSQL: a 202 means the
job is committed on either."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.support.postgres import DURABLE
from tests.support.servers import ServerFactory, all_ended
from yolo_orch.runners.simulated import BATCH_LOG
from yolo_orch.testing.chaos import SUBMIT_TIMEOUT_S, Submitter, check_total_queue, submission

OPERATIONS = 200
KILL_AFTER_ACKS = 100
CLIENTS = 4


@pytest.mark.acceptance
@pytest.mark.parametrize("database", DURABLE)
@pytest.mark.parametrize("batching", [False, True], ids=["alone", "batched"])
def test_sigkill_loses_no_acknowledged_job(
    server_factory: ServerFactory,
    executor_settings: dict[str, object],
    batching: bool,
    database: str,
    request: pytest.FixtureRequest,
) -> None:
    # batched: queued inference jobs of one priority's params share forward passes of 8 images
    if batching and executor_settings["executor"] == "ray":
        pytest.skip("Ray lanes (`<node>/cuda:i`) take no batches: the unbatched run covers Ray")
    settings: dict[str, object] = {"batch_max_images": '{"sim": 8}'} if batching else {}
    postgres = request.getfixturevalue("postgres") if database == "postgresql" else None
    if postgres is not None:  # an empty database of its own, migrated by the server at start
        settings["database_url"] = postgres.new_database(migrated=False)
    server = server_factory(sim_lanes=2, max_attempts=3, **executor_settings, **settings)
    server.start()
    submissions = [submission(i) for i in range(OPERATIONS)]
    submitter = Submitter(server, submissions)

    with ThreadPoolExecutor(CLIENTS) as pool:
        clients = [pool.submit(submitter.run_client) for _ in range(CLIENTS)]
        submitter.wait_acked(KILL_AFTER_ACKS, timeout=SUBMIT_TIMEOUT_S)
        assert server.kill() == -9
        acked_before_kill = submitter.acked
        server.start()
        for future in clients:
            future.result(timeout=SUBMIT_TIMEOUT_S)

    outcomes = Counter(item.outcome for item in submissions)
    assert outcomes["pending"] == 0
    assert outcomes["refused"] == 0, [i.detail for i in submissions if i.outcome == "refused"]
    assert acked_before_kill < OPERATIONS, "the kill came after the last submission"
    assert outcomes["acked"] > acked_before_kill, "nothing was submitted after the restart"

    with server.client() as client:
        jobs = all_ended(client, timeout=30)
    check_total_queue(server, submissions, jobs)
    if postgres is not None:  # and they were kept there, not in a SQLite file of data_dir
        database = str(settings["database_url"]).rsplit("/", 1)[1]
        assert postgres.sql("SELECT count(*) FROM jobs", database) == len(jobs)
        assert not list(server.data_dir.glob("*.db"))
    shared = list(server.data_dir.glob(f"jobs/*/{BATCH_LOG}"))
    assert bool(shared) is batching, "batched runs shared no pass, or unbatched ones did"
