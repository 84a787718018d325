"""Run the real `yolo-orch serve` as a subprocess and talk to it over HTTP: the harness is
`yolo_orch.testing`, its fixtures are in `tests/support/servers.py`."""

from tests.support.servers import executor_settings, pytest_runtest_makereport, server_factory

__all__ = ["executor_settings", "pytest_runtest_makereport", "server_factory"]
