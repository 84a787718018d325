"""Proof tests: real `yolo-orch serve` subprocesses under crash, overload, fuzzing and
concurrency. They reuse the acceptance suite's `Server` helper and its `server_factory` fixture
(which prints the servers' log tails when a test fails)."""

from tests.acceptance.conftest import pytest_runtest_makereport, server_factory

__all__ = ["pytest_runtest_makereport", "server_factory"]
