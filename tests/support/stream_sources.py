"""Live cameras on loopback as pytest fixtures (registered for every test by tests/conftest.py's
`pytest_plugins`): `rtsp_server` and `mjpeg_server`, each started, and stopped at teardown.

Where GStreamer's RTSP server is missing, `rtsp_server` skips the test on a developer's machine
but fails it in CI (the `CI` variable set): .ci/run installs the packages, so a skip there would
mean the stream tests silently stopped running.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from yolo_orch.testing.streams import MjpegServer, RtspServer, rtsp_unavailable


def require_rtsp() -> None:
    """Skips (or, in CI, fails) the calling test where `RtspServer` cannot run."""
    reason = rtsp_unavailable()
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the RTSP tests, but {reason}")
    pytest.skip(reason)


@pytest.fixture
def rtsp_server() -> Iterator[RtspServer]:
    """One 640x480@15 test-pattern camera at `rtsp_server.url()`; for other settings (mounts, a
    file), call `require_rtsp()` and start an `RtspServer` of your own."""
    require_rtsp()
    with RtspServer() as server:
        yield server


@pytest.fixture
def mjpeg_server() -> Iterator[MjpegServer]:
    """A 640x480@15 MJPEG camera at `mjpeg_server.url`."""
    with MjpegServer() as server:
        yield server
