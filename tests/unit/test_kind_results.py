"""Each kind names its result's shape, and the result union the API and the client read holds
exactly those: a kind added to the table without its shape in the union fails here."""

from __future__ import annotations

import typing

from yolo_orch.domain.results import JobResultDetail
from yolo_orch.kinds import KINDS


def test_the_result_union_is_the_kinds_results() -> None:
    members = set(typing.get_args(JobResultDetail.model_fields["root"].annotation))
    assert members == {kind.result for kind in KINDS.values()}
    assert len(members) == len(KINDS)  # no two kinds share a shape the client cannot tell apart
