"""Stream values: sources shown with their credentials redacted, the hosts a server lets streams
open, and which lanes take streams."""

from __future__ import annotations

import pytest

from yolo_orch.config.streams import LiveStreams
from yolo_orch.domain.streams import AllowedHosts, check_allowed_hosts, redacted
from yolo_orch.errors import InvalidJob


@pytest.mark.parametrize(
    ("source", "shown"),
    [
        ("rtsp://admin:hunter2@cam1.lan:554/live", "rtsp://***@cam1.lan:554/live"),
        ("rtsp://admin@cam1.lan/live", "rtsp://***@cam1.lan/live"),
        (
            "http://cam.lan/video.mjpg?user=me&password=hunter2",
            "http://cam.lan/video.mjpg?user=me&password=***",
        ),
        (
            "https://cdn.lan/live.m3u8?token=abc&quality=hd",
            "https://cdn.lan/live.m3u8?token=***&quality=hd",
        ),
        ("rtsp://u:p@[fd00::1]:8554/a", "rtsp://***@[fd00::1]:8554/a"),
        ("rtsp://cam1.lan/live", "rtsp://cam1.lan/live"),
        ("clips/lobby.mp4", "clips/lobby.mp4"),
    ],
)
def test_credentials_are_redacted(source: str, shown: str) -> None:
    assert redacted(source) == shown
    assert "hunter2" not in redacted(source)


@pytest.mark.parametrize(
    ("source", "allowed"),
    [
        ("rtsp://cam1.lan/live", True),
        ("rtsp://CAM1.lan./live", True),
        ("rtsp://a.cams.lan/live", True),
        ("rtsp://cams.lan/live", False),  # the wildcard's own domain is not one of its hosts
        ("rtsp://10.20.3.4/live", True),
        ("rtsp://10.21.0.1/live", False),
        ("rtsp://[fd00::7]/live", True),
        ("rtsp://169.254.169.254/latest", False),
        ("http://localhost:8000/v1/jobs", False),
        ("rtsp://evil.example/cam1.lan", False),
    ],
)
def test_hosts_are_matched_as_listed(source: str, allowed: bool) -> None:
    hosts = AllowedHosts(("cam1.lan", "*.cams.lan", "10.20.0.0/16", "fd00::/64"))
    if allowed:
        hosts.check(source)
    else:
        with pytest.raises(InvalidJob) as refused:
            hosts.check(source)
        assert refused.value.code == "source_not_allowed"


def test_by_default_no_host_is_allowed_and_only_stream_schemes_are() -> None:
    with pytest.raises(InvalidJob):
        AllowedHosts().check("rtsp://127.0.0.1/cam0")
    for source in ("file:///etc/passwd", "ftp://cam1.lan/x", "rtmp://cam1.lan/live"):
        with pytest.raises(InvalidJob) as refused:
            AllowedHosts(("cam1.lan",)).check(source)
        assert "streams open" in refused.value.message


def test_a_refusal_shows_the_source_redacted() -> None:
    with pytest.raises(InvalidJob) as refused:
        AllowedHosts().check("rtsp://admin:hunter2@cam9.lan/live")
    assert "hunter2" not in refused.value.message
    assert "***@cam9.lan" in refused.value.message


def test_a_typo_in_the_allowed_hosts_is_refused() -> None:
    check_allowed_hosts(["cam1.lan", "*.cams.lan", "10.0.0.0/8", "fd00::1"])
    for entry in ("10.0.0.0/33", "cam 1", "http://cam1.lan"):
        with pytest.raises(ValueError, match=r"stream_allowed_hosts|does not appear|not a valid"):
            check_allowed_hosts([entry])


def test_lanes_of_this_host_take_streams_by_kind_and_cluster_lanes_none() -> None:
    settings = LiveStreams(streams_per_lane={"cpu": 2})
    assert settings.stream_shares("cpu") == (2, 60.0)
    assert settings.stream_shares("cuda:1") == (32, 960.0)
    assert settings.stream_shares("node-a/cuda:0") == (0, 0.0)
