"""Proof tests: real `yolo-orch serve` subprocesses under crash, overload, fuzzing and
concurrency, on the acceptance tests' harness (`tests/support/servers.py`), whose `server_factory`
prints the servers' log tails when a test fails."""

from tests.support.servers import pytest_runtest_makereport, server_factory

__all__ = ["pytest_runtest_makereport", "server_factory"]
