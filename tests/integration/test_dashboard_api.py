"""What the dashboard needs from the server besides the API it already had: the page and its
files without a token, the GPU history ring buffer, the server-wide change log behind
GET /v1/events, and the images uploaded with a job. (The browser drives all of it in
tests/acceptance/test_dashboard.py.)"""

from __future__ import annotations

import asyncio
import hashlib
import io
import re
from collections.abc import Callable

import httpx
import pytest
from PIL import Image

from tests.conftest import serve, wait_terminal
from tests.support.nvml import FakeGpu, FakeNvml
from tests.support.problems import assert_problem
from yolo_orch.api.gpu_history import TelemetryHistory
from yolo_orch.app import create_app
from yolo_orch.config import Settings
from yolo_orch.domain import JobKind, JobState
from yolo_orch.jobs.notifications import JobEvents
from yolo_orch.ops.telemetry import GpuReading, GpuTelemetry
from yolo_orch.params.inference import InferenceParams
from yolo_orch.ui import STATIC_DIR

TOKEN = "dashboard-token-for-tests"
EXTERNAL_URL = re.compile(r"(?:https?:)?//[\w.-]+", re.IGNORECASE)
REFERENCED = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)["']""", re.IGNORECASE)


def png_bytes(width: int = 64, height: int = 48) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (200, 120, 40)).save(out, format="PNG")
    return out.getvalue()


@pytest.fixture
def token_settings(settings_factory: Callable[..., Settings]) -> Settings:
    digest = hashlib.sha256(TOKEN.encode()).hexdigest()
    return settings_factory(tokens=[{"sha256": digest, "scope": "admin"}])


@pytest.mark.parametrize("path", ["/", "/ui"])
async def test_the_page_and_its_files_need_no_token(token_settings: Settings, path: str) -> None:
    async with serve(create_app(token_settings)) as client:
        page = await client.get(path)
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        assert "default-src 'self'" in page.headers["content-security-policy"]
        assert EXTERNAL_URL.findall(page.text) == [], "the page names another host"
        assets = {url for url in REFERENCED.findall(page.text) if not url.startswith("#")}
        assert any(url.endswith(".js") for url in assets), assets
        for url in sorted(assets):
            assert url.startswith("/ui/static/"), url
            assert (await client.get(url)).status_code == 200, url
        # The API behind it still wants the token.
        assert_problem(await client.get("/v1/jobs"), 401, "unauthorized")
        assert_problem(await client.get("/ui/nothing-here"), 401, "unauthorized")
        headers = {"Authorization": f"Bearer {TOKEN}"}
        assert (await client.get("/v1/jobs", headers=headers)).status_code == 200


def test_every_vendored_library_ships_its_licence() -> None:
    vendor = STATIC_DIR / "vendor"
    libraries = [folder for folder in vendor.iterdir() if folder.is_dir()]
    assert libraries
    for folder in libraries:
        assert (folder / "LICENSE").read_text().strip(), folder
    scripts = [path for path in STATIC_DIR.rglob("*.js")]
    assert all(
        EXTERNAL_URL.search(p.read_text()) is None for p in scripts if vendor not in p.parents
    )


class Readings:
    """A sampler whose readings the test sets."""

    def __init__(self) -> None:
        self.by_lane: dict[str, GpuReading | None] = {}
        self.calls = 0

    def __call__(self) -> dict[str, GpuReading | None]:
        self.calls += 1
        return dict(self.by_lane)


async def test_the_gpu_history_keeps_the_latest_samples_per_lane() -> None:
    readings = Readings()
    history = TelemetryHistory(readings, interval_s=1.0, samples=3)
    assert history.enabled
    for used in range(5):
        readings.by_lane = {"cuda:0": GpuReading(memory_used_bytes=used), "cuda:1": None}
        await history.sample_once()
    assert readings.calls == 5
    samples = history.history()
    assert list(samples) == ["cuda:0"]  # a lane whose reading failed gets no sample
    assert [sample.reading.memory_used_bytes for sample in samples["cuda:0"]] == [2, 3, 4]
    assert [s.at for s in samples["cuda:0"]] == sorted(s.at for s in samples["cuda:0"])


async def test_without_a_sampler_the_history_is_empty() -> None:
    history = TelemetryHistory(None, interval_s=1.0, samples=3)
    await history.sample_once()
    await history.run()  # returns at once: nothing to sample
    assert not history.enabled
    assert history.history() == {}


async def test_device_history_is_empty_without_gpus(client: httpx.AsyncClient) -> None:
    body = (await client.get("/v1/devices/history")).json()
    assert body == {"enabled": False, "interval_s": 5.0, "devices": []}


async def test_device_history_serves_what_nvml_read(
    settings_factory: Callable[..., Settings],
) -> None:
    settings = settings_factory(lanes=["cuda:0"], telemetry_history_interval_s=60.0)
    telemetry = GpuTelemetry(FakeNvml(FakeGpu(utilization=42)))
    async with serve(create_app(settings, telemetry=telemetry)) as client, asyncio.timeout(10):
        while not (body := (await client.get("/v1/devices/history")).json())["devices"]:
            await asyncio.sleep(0.01)  # the first sample is taken at start, in a thread
        [device] = (await client.get("/v1/devices")).json()["devices"]
    assert device["device_name"] == "NVIDIA Fake 80GB"
    assert body["enabled"] is True
    [lane] = body["devices"]
    assert lane["id"] == "cuda:0"
    [sample] = lane["samples"]  # the first is taken at start
    assert sample["utilization_percent"] == 42
    assert sample["memory_total_bytes"] == 80 << 30


async def test_the_change_log_says_which_jobs_changed_since_an_event() -> None:
    events = JobEvents(logged_changes=3)
    start = events.latest
    assert events.changed_since(start) == []
    assert events.changed_since(start - 1) is None  # not an id of this log
    events.publish("a")
    events.publish("b")
    events.publish("a")
    assert events.changed_since(start) == ["b", "a"]  # each once, by its latest change
    assert events.changed_since(start + 2) == ["a"]
    events.publish("c")
    assert events.changed_since(start) is None  # fell out of the log: resync
    assert events.changed_since(events.latest + 1) is None  # from another process
    await events.wait_for_any(start)  # returns at once: something changed since


async def test_an_uploaded_image_is_served_back(client: httpx.AsyncClient) -> None:
    image = png_bytes()
    submitted = await client.post(
        "/v1/jobs/inference",
        data={"model": "sim", "params": '{"sim_seconds": 0.01, "sim_steps": 1}'},
        files=[("images", ("shot.png", image, "image/png"))],
    )
    job_id = submitted.json()["id"]
    await wait_terminal(client, job_id)
    served = await client.get(f"/v1/jobs/{job_id}/inputs/0")
    assert served.status_code == 200
    assert served.content == image
    assert served.headers["content-type"] == "image/png"
    assert served.headers["x-content-type-options"] == "nosniff"
    assert_problem(await client.get(f"/v1/jobs/{job_id}/inputs/1"), 404, "upload_not_found")
    assert_problem(await client.get("/v1/jobs/nope/inputs/0"), 404, "job_not_found")


async def test_an_upload_that_is_no_image_is_only_a_download(client: httpx.AsyncClient) -> None:
    submitted = await client.post(
        "/v1/jobs/inference",
        data={"model": "sim", "params": '{"sim_seconds": 0.01, "sim_steps": 1}'},
        files=[("images", ("page.html", b"<script>alert(1)</script>", "text/html"))],
    )
    served = await client.get(f"/v1/jobs/{submitted.json()['id']}/inputs/0")
    assert served.status_code == 200
    assert served.headers["content-type"] == "application/octet-stream"
    assert served.headers["content-disposition"].startswith("attachment")
    assert served.headers["content-security-policy"] == "sandbox"


async def test_inputs_named_under_a_data_root_are_not_served(client: httpx.AsyncClient) -> None:
    job = (
        await client.post(
            "/v1/jobs", json={"kind": "inference", "model": "sim", "inputs": ["a.jpg"]}
        )
    ).json()
    assert_problem(await client.get(f"/v1/jobs/{job['id']}/inputs/0"), 404, "upload_not_found")


def test_the_scripts_keep_no_copy_of_what_the_server_defines() -> None:
    """States, terminal states, kinds and params come from GET /v1/meta (static/meta.js): no
    script lists two states or two kinds of its own, and the submit form names no param."""
    scripts = {
        path.relative_to(STATIC_DIR).as_posix(): path.read_text()
        for path in STATIC_DIR.rglob("*.js")
        if STATIC_DIR / "vendor" not in path.parents
    }
    for names in ({str(state) for state in JobState}, {str(kind) for kind in JobKind}):
        for name, text in scripts.items():
            for listed in re.findall(r"\[[^\[\]]*\]", text):  # array literals
                quoted = set(re.findall(r"""['"](\w+)['"]""", listed))
                assert len(quoted & names) < 2, f"{name} lists {sorted(quoted & names)}"
    params = set(InferenceParams.model_fields)
    for form in ("views/submit.js", "views/params.js"):
        named = set(re.findall(r"\b\w+\b", scripts[form])) & params
        assert not named - {"format"}, f"{form} names {sorted(named)}"  # `format`: a JS word too
