"""Capture on the simulated runtime through the HTTP API: an inference job and a stream capture
exactly the images their rule selects, within their caps, into a managed dataset whose labels
are their result entries'; what cannot be captured is refused at submission, storing nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.conftest import serve, sim_job, wait_terminal
from tests.support.problems import assert_problem
from yolo_orch.app import create_app
from yolo_orch.config import Settings
from yolo_orch.files.managed_datasets import ManagedDatasets
from yolo_orch.labelling.yolo_labels import label_lines
from yolo_orch.testing.streams import RtspServer
from yolo_orch.testing.video import make_video

SIM_NAMES = ["person", "bicycle", "car", "dog"]
"""The simulated runtime's classes, in its order."""
INPUTS = [f"shot{i}.jpg" for i in range(12)]


@pytest.fixture
def app(tmp_path: Path, settings_factory: Callable[..., Settings]) -> FastAPI:
    data = tmp_path / "data"
    make_video(data / "clip.mp4", frames=30, size=(320, 240))
    return create_app(settings_factory(data_roots=[data], stream_allowed_hosts=["127.0.0.1"]))


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with serve(app) as client:
        yield client


def datasets(app: FastAPI) -> ManagedDatasets:
    found: ManagedDatasets = app.state.services.datasets
    return found


async def finished(client: httpx.AsyncClient, job: dict[str, Any]) -> dict[str, Any]:
    response = await client.post("/v1/jobs", json=job)
    assert response.status_code == 202, response.text
    done = await wait_terminal(client, response.json()["id"], deadline_s=30)
    assert done["state"] == "succeeded", done
    return done


async def entries(client: httpx.AsyncClient, job_id: str) -> list[dict[str, Any]]:
    images: list[dict[str, Any]] = (await client.get(f"/v1/jobs/{job_id}/result")).json()["images"]
    return images


def captured_labels(store: ManagedDatasets, name: str, job_id: str) -> list[list[str]]:
    """The labels of the job's items, in the order they were added."""
    items = sorted(
        (item for item in store.items(name) if item.job_id == job_id), key=lambda item: item.id
    )
    assert all(item.source == "model" for item in items)
    return [store.item_labels(name, item.id) for item in items]


async def test_an_inference_job_captures_exactly_the_images_its_rule_selects(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    datasets(app).create("unsure", "detect", SIM_NAMES)
    capture = {"into": "unsure", "when": {"conf_below": 0.6, "no_detections": True}}
    job = await finished(client, sim_job(inputs=INPUTS, params={"capture": capture}))
    images = await entries(client, job["id"])
    chosen = [
        image
        for image in images
        if not image["detections"] or any(d["confidence"] < 0.6 for d in image["detections"])
    ]
    assert 0 < len(chosen) < len(images)  # the rule chose some, not all
    assert job["result"]["capture"] == {
        "selected": len(chosen),
        "captured": len(chosen),
        "capped": 0,
        "dropped": 0,
    }
    expected = [label_lines("detect", image, SIM_NAMES) for image in chosen]
    assert captured_labels(datasets(app), "unsure", job["id"]) == expected
    item = datasets(app).items("unsure")[0]
    assert item.model_id == "sim"
    assert datasets(app).item_image("unsure", item.id).read_bytes()[:2] == b"\xff\xd8"  # JPEG


async def test_max_total_caps_what_a_job_captures(app: FastAPI, client: httpx.AsyncClient) -> None:
    datasets(app).create("some", "detect", SIM_NAMES)
    capture = {"into": "some", "when": {"every_n": 1}, "max_total": 5}
    job = await finished(client, sim_job(inputs=INPUTS, params={"capture": capture}))
    assert job["result"]["capture"] == {"selected": 12, "captured": 5, "capped": 7, "dropped": 0}
    images = await entries(client, job["id"])
    expected = [label_lines("detect", image, SIM_NAMES) for image in images[:5]]
    assert captured_labels(datasets(app), "some", job["id"]) == expected


async def test_every_n_takes_the_first_and_then_every_nth(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    datasets(app).create("sampled", "detect", SIM_NAMES)
    capture = {"into": "sampled", "when": {"every_n": 5}, "max_per_hour": 100}
    job = await finished(client, sim_job(inputs=INPUTS, params={"capture": capture}))
    assert job["result"]["capture"]["captured"] == 3  # the 1st, 6th and 11th
    images = await entries(client, job["id"])
    expected = [label_lines("detect", images[i], SIM_NAMES) for i in (0, 5, 10)]
    assert captured_labels(datasets(app), "sampled", job["id"]) == expected


async def test_a_job_without_capture_has_no_capture_summary(client: httpx.AsyncClient) -> None:
    job = await finished(client, sim_job())
    assert "capture" not in job["result"]


async def job_count(client: httpx.AsyncClient) -> int:
    return len((await client.get("/v1/jobs")).json()["jobs"])


@pytest.mark.parametrize(
    ("capture", "code"),
    [
        ({"into": "nowhere", "when": {"every_n": 1}}, "dataset_not_found"),
        ({"into": "outlines", "when": {"every_n": 1}}, "task_mismatch"),
    ],
)
async def test_capture_into_a_missing_or_other_task_dataset_is_refused(
    app: FastAPI, client: httpx.AsyncClient, capture: dict[str, Any], code: str
) -> None:
    datasets(app).create("outlines", "segment", SIM_NAMES)
    for job in (
        sim_job(params={"capture": capture}),
        {"kind": "stream", "model": "sim", "sources": ["clip.mp4"], "params": {"capture": capture}},
    ):
        assert_problem(await client.post("/v1/jobs", json=job), 422, code)
    assert await job_count(client) == 0
    assert datasets(app).get("outlines").items == 0


async def test_a_rule_without_a_condition_is_an_invalid_request(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/v1/jobs", json=sim_job(params={"capture": {"into": "x", "when": {}}})
    )
    assert_problem(response, 422, "invalid_request")


async def test_a_stream_captures_its_frames_within_max_total(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    datasets(app).create("frames", "detect", SIM_NAMES)
    capture = {"into": "frames", "when": {"every_n": 2}, "max_total": 3}
    params = {"max_fps": 30, "max_frames": 12, "snapshot_every_s": 0, "capture": capture}
    stream = {"kind": "stream", "model": "sim", "sources": ["clip.mp4"], "params": params}
    response = await client.post("/v1/jobs", json=stream)
    assert response.status_code == 202, response.text
    done = await wait_terminal(client, response.json()["id"], deadline_s=30)
    assert done["state"] == "succeeded", done
    frames = done["result"]["frames"]
    selected = (frames + 1) // 2  # frames 1, 3, 5, ... of its one source
    assert done["result"]["capture"] == {
        "selected": selected,
        "captured": 3,
        "capped": selected - 3,
        "dropped": 0,
    }
    store = datasets(app)
    labels = captured_labels(store, "frames", done["id"])
    assert len(labels) == 3
    for lines in labels:  # the simulated person, a box of the frame's middle fifth in height
        [line] = lines
        class_id, _, y, _, height = line.split()
        assert (class_id, float(y), float(height)) == ("0", 0.5, 0.2)
    image = store.item_image("frames", store.items("frames")[0].id)
    assert image.suffix == ".jpg"


async def test_a_camera_stream_captures_no_more_in_an_hour_than_max_per_hour(
    app: FastAPI, client: httpx.AsyncClient, rtsp_server: RtspServer
) -> None:
    datasets(app).create("camera", "detect", SIM_NAMES)
    capture = {"into": "camera", "when": {"conf_above": 0.5}, "max_per_hour": 3}
    params = {"max_fps": 15, "max_frames": 8, "snapshot_every_s": 0, "capture": capture}
    stream = {"kind": "stream", "model": "sim", "sources": [rtsp_server.url()], "params": params}
    response = await client.post("/v1/jobs", json=stream)
    assert response.status_code == 202, response.text
    done = await wait_terminal(client, response.json()["id"], deadline_s=60)
    assert done["state"] == "succeeded", done
    frames = done["result"]["frames"]  # each has the simulated person, at 0.9
    assert done["result"]["capture"] == {
        "selected": frames,
        "captured": 3,
        "capped": frames - 3,
        "dropped": 0,
    }
    store = datasets(app)
    sizes = {_size(store.item_image("camera", item.id)) for item in store.items("camera")}
    assert sizes == {(640, 480)}  # the camera's frames, whole


def _size(path: Path) -> tuple[int, int]:
    from PIL import Image

    with Image.open(path) as image:
        return image.size
