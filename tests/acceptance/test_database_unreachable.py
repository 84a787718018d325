"""A database the server cannot open stops `serve` before it starts, in one line that says what
to check, rather than in the lifespan's traceback."""

from __future__ import annotations

import pytest

from tests.support.servers import ServerFactory
from yolo_orch.testing import free_port


@pytest.mark.acceptance
def test_a_postgresql_url_no_server_answers_is_one_line_that_says_what_to_check(
    server_factory: ServerFactory,
) -> None:
    url = f"postgresql+psycopg://orch:secret@127.0.0.1:{free_port()}/jobs"
    server = server_factory("unreachable", database_url=url)
    server.start(wait_ready=False)

    assert server.wait(timeout=30) == 1
    stderr = server.stderr()
    refusal = [line for line in stderr.splitlines() if line.startswith("yolo-orch: ")]
    assert len(refusal) == 1, stderr
    assert "cannot open the database postgresql+psycopg://orch:***@127.0.0.1" in refusal[0]
    assert "Check database_url" in refusal[0]
    assert "createdb --locale=C --template=template0" in refusal[0]
    assert "secret" not in stderr
    assert "Traceback" not in stderr
