"""The HTTP edges of a real `serve`, through a socket client that writes bytes as a hostile or
careless client would: a body over its limit still being sent when the 413 is ready, requests
uvicorn cannot parse, HEAD."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.support.raw_http import HEALTHZ, Connection, post_head
from tests.support.servers import submit
from yolo_orch.testing import Server, sim_inference

JSON_LIMIT = 4096
DISCARD_LIMIT = 16 << 20
"""The server reads and drops this much of a refused body before it closes the connection."""
HEADER_LIMIT = 4096


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("edges")
    server = Server(
        root / "data",
        root / "logs",
        "edges",
        max_request_bytes=JSON_LIMIT,
        max_discard_bytes=DISCARD_LIMIT,
        max_header_bytes=HEADER_LIMIT,
    )
    try:
        server.start()
        yield server
    finally:
        server.cleanup()


@pytest.fixture
def conn(server: Server) -> Iterator[Connection]:
    connection = Connection(server)
    try:
        yield connection
    finally:
        connection.close()


@pytest.mark.acceptance
def test_a_client_still_sending_a_body_too_large_gets_the_413(conn: Connection) -> None:
    size = 8 << 20  # far over the limit, within what the server drops
    conn.send(post_head(size))
    conn.send_zeros(size)  # a reset connection would fail here, or at the read below
    conn.reply().problem(413, "body_too_large")
    conn.send(HEALTHZ)  # the body was read to its end: the connection is still good
    assert conn.reply().status == 200


@pytest.mark.acceptance
def test_a_chunked_body_too_large_gets_the_413(conn: Connection) -> None:
    conn.send(post_head(None))
    chunk = b"0" * (1 << 16)
    for _ in range(64):
        conn.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
    conn.send(b"0\r\n\r\n")
    conn.reply().problem(413, "body_too_large")
    conn.send(HEALTHZ)
    assert conn.reply().status == 200


@pytest.mark.acceptance
def test_a_body_past_what_the_server_drops_gets_the_413_and_a_close(conn: Connection) -> None:
    conn.send(post_head(DISCARD_LIMIT + 1))  # the body is never sent: nothing waits unread
    reply = conn.reply()
    reply.problem(413, "body_too_large")
    assert reply.headers["connection"] == "close"
    assert conn.closed_by_server()


@pytest.mark.acceptance
def test_a_client_that_waits_for_100_continue_gets_the_413_first(conn: Connection) -> None:
    conn.send(post_head(1 << 20, "Expect: 100-continue"))
    reply = conn.reply()  # not "100 Continue": the server does not ask for a body it refuses
    reply.problem(413, "body_too_large")
    assert reply.headers["connection"] == "close"


@pytest.mark.acceptance
@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GARBAGE\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nBad Header\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nContent-Length: x\r\n\r\n",
    ],
    ids=["request-line", "header-line", "content-length"],
)
def test_a_request_that_is_not_http_gets_a_problem(conn: Connection, request_bytes: bytes) -> None:
    conn.send(request_bytes)
    reply = conn.reply()
    reply.problem(400, "invalid_http")
    assert reply.headers["connection"] == "close"
    assert conn.closed_by_server()


@pytest.mark.acceptance
def test_headers_over_their_limit_get_a_431_problem(conn: Connection) -> None:
    # Without the blank line that ends them: the server refuses once it holds more than the
    # limit, and nothing is left unread when it closes.
    conn.send(
        b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Padding: " + b"a" * (2 * HEADER_LIMIT)
    )
    reply = conn.reply()
    problem = reply.problem(431, "headers_too_large")
    assert str(HEADER_LIMIT) in problem["detail"]
    assert conn.closed_by_server()


@pytest.mark.acceptance
def test_a_whole_head_over_its_limit_in_one_write_gets_a_431_problem(conn: Connection) -> None:
    # Ended, and small enough to arrive in one read of the socket: the parser reads all of it
    # in one feed and counts it. (Much larger, the rest would still be arriving when the server
    # closes, and the client's read could meet a reset before the answer.)
    padding = b"a" * (HEADER_LIMIT + 1024)
    conn.send(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Padding: %s\r\n\r\n" % padding)
    reply = conn.reply()
    reply.problem(431, "headers_too_large")
    assert conn.closed_by_server()


@pytest.mark.acceptance
def test_a_head_trickling_past_its_timeout_gets_a_408_problem(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    root = tmp_path_factory.mktemp("slow-heads")
    server = Server(root / "data", root / "logs", "slow-heads", header_timeout_s=1)
    connections: list[Connection] = []
    try:
        server.start()
        idle, trickling, kept = (Connection(server) for _ in range(3))
        connections += [idle, trickling, kept]
        trickling.send(b"GET /healthz HTTP/1.1\r\nHost: te")  # and never the rest
        kept.send(HEALTHZ)  # a head that arrives in time is served as ever
        assert kept.reply().status == 200
        for conn in (idle, trickling):
            conn.reply().problem(408, "request_timeout")
            assert conn.closed_by_server()
        # A long poll answered after the timeout, with a pipelined head unfinished behind it:
        # the answer comes whole, then the unfinished head gets its 408.
        with server.client() as client:
            job = submit(client, sim_inference("a.jpg", sim_seconds=2.5))
        polling = Connection(server)
        connections.append(polling)
        poll = f"GET /v1/jobs/{job['id']} HTTP/1.1\r\nHost: localhost\r\nPrefer: wait=10\r\n\r\n"
        polling.send(poll.encode() + b"GET /healthz HTTP/1.1\r\nHost: te")
        answer = polling.reply()
        assert answer.status == 200
        assert json.loads(answer.body)["state"] == "succeeded"
        polling.reply().problem(408, "request_timeout")
    finally:
        for conn in connections:
            conn.close()
        server.cleanup()


@pytest.mark.acceptance
def test_an_unsupported_transfer_coding_gets_a_501_problem(conn: Connection) -> None:
    conn.send(b"POST /v1/jobs HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip\r\n\r\n")
    reply = conn.reply()
    reply.problem(501, "not_implemented")
    assert reply.headers["connection"] == "close"


@pytest.mark.acceptance
def test_pipelined_requests_past_the_header_limit_together_are_each_answered(
    conn: Connection,
) -> None:
    # Each head is under the limit, the three together over it: the bound is per request.
    padded = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Padding: %s\r\n\r\n"
    conn.send(b"".join(padded % (b"a" * (HEADER_LIMIT // 2)) for _ in range(3)))
    assert [conn.reply().status for _ in range(3)] == [200, 200, 200]


@pytest.mark.acceptance
def test_head_answers_like_get_without_a_body(conn: Connection) -> None:
    conn.send(b"GET /v1/jobs HTTP/1.1\r\nHost: localhost\r\n\r\n")
    get = conn.reply()
    conn.send(b"HEAD /v1/jobs HTTP/1.1\r\nHost: localhost\r\n\r\n")
    head = conn.reply(head=True)
    assert head.status == get.status == 200
    assert head.headers.keys() == get.headers.keys()
    assert head.headers["content-length"] == get.headers["content-length"] != "0"
    conn.send(HEALTHZ)  # nothing followed the headers: the next answer parses
    assert conn.reply().body == b'{"status":"ok"}'


@pytest.mark.acceptance
def test_head_on_an_event_stream_ends_with_the_headers(server: Server, conn: Connection) -> None:
    with server.client() as client:
        job = submit(client, sim_inference("a.jpg", sim_seconds=60))
        try:
            conn.send(
                f"HEAD /v1/jobs/{job['id']}/events HTTP/1.1\r\nHost: localhost\r\n\r\n".encode()
            )
            head = conn.reply(head=True)
            assert head.status == 200
            assert head.headers["content-type"].startswith("text/event-stream")
            conn.send(HEALTHZ)  # answered now, not after the job: the stream did not go on
            assert conn.reply().status == 200
        finally:
            client.post(f"/v1/jobs/{job['id']}/cancel")
