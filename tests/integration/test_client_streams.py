"""Stream jobs through the Python client and the command line, against the app served in this
process (uvicorn on a loopback port, on a thread of its own) with the simulated runtime: a looped
local video, the fake detector's one person crossing the frame left to right every 4 s."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import uvicorn
from typer.testing import CliRunner, Result

from yolo_orch.app import create_app
from yolo_orch.cli import app as cli_app
from yolo_orch.client import ApiError, AsyncClient, Client, ExitCode, Job
from yolo_orch.client.shapes import JobEvent, StreamFrameEntry
from yolo_orch.config import MEMORY_DATABASE_URL, Settings
from yolo_orch.testing import free_port
from yolo_orch.testing.video import make_video

T = TypeVar("T")
FAST = {"max_fps": 20, "snapshot_every_s": 0.2}
"""Frames and snapshots quickly enough for a test to see several of each within a second."""


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    base = tmp_path_factory.mktemp("client-streams")
    data = base / "data"
    make_video(data / "clip.mp4", frames=30, size=(160, 120))
    (data / "photo.jpg").write_bytes(b"not read by the simulated runtime")
    settings = Settings(
        data_dir=base / "var",
        database_url=MEMORY_DATABASE_URL,
        runtime="simulated",
        shutdown_grace_s=2.0,
        data_roots=[data],
        streams_per_lane={"sim": 8},
        stream_fps_per_lane={"sim": 100.0},
    )
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    _eventually(lambda: server.started, bool, deadline_s=20)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)


@pytest.fixture
def client(server_url: str) -> Iterator[Client]:
    with Client(server_url, "") as opened:
        yield opened


@pytest.fixture
def cli(server_url: str) -> Callable[..., Result]:
    runner = CliRunner()

    def run(*args: str) -> Result:
        env = {"YOLO_ORCH_URL": server_url, "YOLO_ORCH_TOKEN": None}
        return runner.invoke(cli_app, list(args), env=env)

    return run


def _eventually(ask: Callable[[], T], done: Callable[[T], bool], deadline_s: float = 15) -> T:
    """Ask again until the answer is `done`: a stream's frames come at their own pace."""
    deadline = time.monotonic() + deadline_s
    while not done(answer := ask()):
        if time.monotonic() > deadline:
            raise AssertionError(f"still {answer!r} after {deadline_s} s")
        time.sleep(0.05)
    return answer


def _snapshot_when_written(client: Client, job_id: str) -> bytes:
    def ask() -> bytes | None:
        try:
            return client.snapshot(job_id)
        except ApiError as exc:
            if exc.code != "snapshot_not_found":  # none yet: the only refusal allowed
                raise
            return None

    jpeg = _eventually(ask, lambda answer: answer is not None)
    assert jpeg is not None
    return jpeg


def _cancel(client: Client, job_id: str) -> None:
    client.cancel(job_id)
    assert client.wait(job_id, timeout_s=20).state == "cancelled"


# -- the Python client


def test_a_stream_submitted_from_python_is_paged_and_snapshotted(client: Client) -> None:
    job = client.submit_stream("sim", ["clip.mp4"], params=FAST)
    try:
        assert (job.kind, job.model) == ("stream", "sim")
        first = _eventually(
            lambda: client.stream_frames(job.id, limit=1000), lambda page: len(page.frames) >= 6
        )
        seqs = [frame.seq for frame in first.frames]
        assert seqs == list(range(1, len(seqs) + 1))
        assert (first.next_since, first.oldest, first.missed(0)) == (seqs[-1], 1, 0)
        frame = first.frames[0]
        assert (frame.source, frame.width, frame.height) == (0, 160, 120)
        assert frame.detections[0]["class_name"] == "person"

        two = client.stream_frames(job.id, since=2, limit=2)
        assert ([f.seq for f in two.frames], two.next_since) == ([3, 4], 4)

        paged = list(client.iter_stream_frames(job.id, since=3, page_size=2))
        assert [f.seq for f in paged[:3]] == [4, 5, 6]  # three pages at least, in order
        assert all(isinstance(f, StreamFrameEntry) for f in paged)
        assert [f.seq for f in paged] == list(range(4, 4 + len(paged)))

        assert _snapshot_when_written(client, job.id)[:2] == b"\xff\xd8"
        assert client.job(job.id).state == "running"  # paging and snapshots leave it be
    finally:
        _cancel(client, job.id)


def test_iterating_stops_once_caught_up_with_an_ended_stream(server_url: str) -> None:
    async def scenario() -> tuple[Job, list[int], bytes]:
        async with AsyncClient(server_url, "") as aclient:
            job = await aclient.submit_stream("sim", ["clip.mp4"], params=FAST | {"max_frames": 5})
            ended = await aclient.wait(job.id, timeout_s=20)
            seqs = [frame.seq async for frame in aclient.iter_stream_frames(job.id, page_size=2)]
            return ended, seqs, await aclient.snapshot(job.id)

    ended, seqs, jpeg = asyncio.run(scenario())

    assert ended.state == "succeeded"
    assert seqs[:5] == [1, 2, 3, 4, 5]
    assert jpeg[:2] == b"\xff\xd8"  # the last snapshot stays after the stream ends


def test_refusals_carry_the_servers_codes_and_exit_codes(client: Client) -> None:
    other = client.submit("sim", ["photo.jpg"], params={"sim_seconds": 0.05})
    cases: list[tuple[Callable[[], Any], str, ExitCode]] = [
        (lambda: client.stream_frames(other.id), "not_a_stream", ExitCode.USAGE),
        (lambda: client.snapshot(other.id), "snapshot_not_found", ExitCode.NOT_FOUND),
        (lambda: client.stream_frames("no-such-job"), "job_not_found", ExitCode.NOT_FOUND),
        (
            lambda: client.submit_stream("sim", ["rtsp://10.9.8.7/cam"]),
            "source_not_allowed",
            ExitCode.USAGE,
        ),
        (
            lambda: client.submit_stream("sim", ["clip.mp4"], params={"max_fps": 120}),
            "stream_unsupported",
            ExitCode.USAGE,
        ),
    ]
    for call, code, exit_code in cases:
        with pytest.raises(ApiError) as refused:
            call()
        assert (refused.value.code, refused.value.exit_code) == (code, exit_code), refused.value


# -- the command line


def test_stream_follow_frames_and_snapshot_from_the_command_line(
    cli: Callable[..., Result], client: Client, tmp_path: Path
) -> None:
    submitted = cli(
        "stream",
        "clip.mp4",
        "--model",
        "sim",
        "--max-fps",
        "20",
        "--track",
        "bytetrack",
        "--imgsz",
        "320",
        "--conf",
        "0.3",
        "--line",
        "mid:0.5,0,0.5,1",
        "--zone",
        "left:0,0;0.5,0;0.5,1;0,1",
        "--max-frames",
        "6",
        "-p",
        "snapshot_every_s=0.2",
        "--follow",
        "--quiet",
    )

    assert submitted.exit_code == ExitCode.OK, submitted.output
    job_id = submitted.stdout.splitlines()[0]
    job = client.job(job_id)
    assert job.state == "succeeded"
    assert job.params["track"] == "bytetrack"
    assert (job.params["imgsz"], job.params["conf"], job.params["max_frames"]) == (320, 0.3, 6)
    assert job.params["lines"] == [{"name": "mid", "start": [0.5, 0], "end": [0.5, 1]}]
    assert job.params["zones"][0]["points"] == [[0, 0], [0.5, 0], [0.5, 1], [0, 1]]
    assert "line mid: " in submitted.stderr
    assert "zone left: " in submitted.stderr
    assert "6 frames" in submitted.stderr

    listed = cli("frames", job_id, "--since", "2", "--page-size", "2")
    assert listed.exit_code == ExitCode.OK, listed.output
    frames = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [frame["seq"] for frame in frames] == [3, 4, 5, 6]
    assert all("track_id" in d for frame in frames for d in frame["detections"])

    target = tmp_path / "latest.jpg"
    saved = cli("snapshot", job_id, "-o", str(target))
    assert saved.exit_code == ExitCode.OK, saved.output
    assert target.read_bytes()[:2] == b"\xff\xd8"
    assert str(target) in saved.stdout


def test_ctrl_c_stops_following_not_the_stream(
    cli: Callable[..., Result], client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(self: Client, job_id: str, last_event_id: str | None = None) -> Iterator[Any]:
        yield JobEvent(id="1", event="state", job=self.job(job_id))
        raise KeyboardInterrupt

    monkeypatch.setattr(Client, "events", interrupted)

    followed = cli("stream", "clip.mp4", "-m", "sim", "--max-fps", "5", "--follow", "-q")

    assert followed.exit_code == ExitCode.OK, followed.output
    job_id = followed.stdout.splitlines()[0]
    assert f"stream {job_id} goes on" in followed.stderr
    assert client.job(job_id).state in ("queued", "running")
    _cancel(client, job_id)


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("--line", "mid:0.5,0,0.5", "two points"),
        ("--line", "0.5,0,0.5,1", "NAME:x1,y1,x2,y2"),
        ("--line", "mid:0.5,0,a,1", "numbers"),
        ("--line", "mid:0.5,0,1.5,1", "0 to 1"),
        ("--zone", "door:0,0;1,0", "3 corners"),
        ("--zone", "door:0,0;1;1,1", "each corner is x,y"),
    ],
)
def test_bad_lines_and_zones_are_usage_errors(
    cli: Callable[..., Result], option: str, value: str, says: str
) -> None:
    result = cli("stream", "clip.mp4", "-m", "sim", option, value)

    assert result.exit_code == ExitCode.USAGE, result.output
    assert says in result.output
    assert "submitted" not in result.output


def test_the_servers_refusals_end_the_commands_with_their_exit_codes(
    cli: Callable[..., Result], client: Client
) -> None:
    other = client.submit("sim", ["photo.jpg"], params={"sim_seconds": 0.05})

    not_a_stream = cli("frames", other.id)
    no_snapshot = cli("snapshot", other.id, "-o", "unused.jpg")
    not_allowed = cli("stream", "rtsp://10.9.8.7/cam", "-m", "sim")

    assert not_a_stream.exit_code == ExitCode.USAGE
    assert "(not_a_stream)" in not_a_stream.stderr
    assert no_snapshot.exit_code == ExitCode.NOT_FOUND
    assert "(snapshot_not_found)" in no_snapshot.stderr
    assert not_allowed.exit_code == ExitCode.USAGE
    assert "(source_not_allowed)" in not_allowed.stderr


def test_status_and_devices_show_a_running_stream(
    client: Client, cli: Callable[..., Result]
) -> None:
    job = client.submit_stream("sim", ["clip.mp4"], params=FAST)
    try:
        _eventually(lambda: client.job(job.id), lambda j: j.progress is not None)
        status = cli("status", job.id)
        assert status.exit_code == 0, status.output
        assert "sources   clip.mp4" in status.output
        assert re.search(r"progress  \d+ frames, live, [\d.]+/[\d.]+ fps", status.output)
        devices = cli("devices")
        assert devices.exit_code == 0, devices.output
        assert "STREAMS" in devices.output
        assert re.search(r"1/\d+: [\d.]+ of [\d.]+ fps", devices.output)
    finally:
        _cancel(client, job.id)
