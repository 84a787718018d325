"""The client side of `yolo-orch`: an HTTP client of the v1 API (`ApiClient`), a follower of a
job's event stream (`follow_job`), and the command-line commands built on them."""

from yolo_orch.client.errors import ApiError, ExitCode
from yolo_orch.client.follow import follow_job
from yolo_orch.client.http import ApiClient

__all__ = ["ApiClient", "ApiError", "ExitCode", "follow_job"]
