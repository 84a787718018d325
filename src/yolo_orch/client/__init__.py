"""The Python client of yolo-orch's HTTP API, and the command line built on it.

    from yolo_orch.client import Client

    with Client("http://gpu-host:8000", token) as client:
        job = client.wait(client.submit("yolo11n", ["shots/*.jpg"]).id)

`Client` and `AsyncClient` answer with typed values (`yolo_orch.client.shapes`); every failed
request raises `ApiError`, whose `exit_code` is the command line's. Importing this package
imports httpx and pydantic, never the server, FastAPI or torch (docs/client.md).
"""

from yolo_orch.client.aio import AsyncClient
from yolo_orch.client.errors import ApiError, ClientCode, ExitCode
from yolo_orch.client.shapes import Job, JobEvent
from yolo_orch.client.sync import Client

__all__ = ["ApiError", "AsyncClient", "Client", "ClientCode", "ExitCode", "Job", "JobEvent"]
