"""The one list of machine codes: every member says what it means, the client's own codes never
pass for a server's, and a refusal carries a member, never a string of its own."""

from __future__ import annotations

import pickle

from yolo_orch.client.errors import ClientCode
from yolo_orch.errors import ErrorCode, JobNotFound, QueueFull


def test_every_code_says_what_it_means_in_one_line() -> None:
    for code in ErrorCode:
        assert code.meaning, code
        assert "\n" not in code.meaning, code
        assert code.meaning[0].isupper(), code
        assert code.meaning.endswith("."), code


def test_codes_are_their_own_wire_strings() -> None:
    assert ErrorCode("task_mismatch") is ErrorCode.TASK_MISMATCH
    assert f"{ErrorCode.QUEUE_FULL}" == "queue_full"
    assert JobNotFound("x").code == "job_not_found"
    assert pickle.loads(pickle.dumps(ErrorCode.CUDA_OOM)) is ErrorCode.CUDA_OOM  # across Ray
    assert QueueFull(3).code is ErrorCode.QUEUE_FULL


def test_the_clients_own_codes_are_none_of_the_servers() -> None:
    assert not {str(code) for code in ClientCode} & {str(code) for code in ErrorCode}
