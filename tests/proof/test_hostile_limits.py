"""Hostile inputs against a real `yolo-orch serve`, one test per memory class: each is answered
with its status and code while the server's resident memory stays within a stated bound.

Memory is measured with `PeakRss` (the kernel's peak since just before the input, and RSS
sampled meanwhile), so a spike freed before the answer still counts. The bounds are far below
what the input costs when it is handled whole: 2.7 GB to decode the PNG bomb, the size of the
result file for each reader of a whole result.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.hostile import PeakRss, png_bomb
from tests.support.servers import ServerFactory, submit
from yolo_orch.files.jobfiles import JobFiles
from yolo_orch.testing import Server, sim_inference, wait_terminal

pytestmark = pytest.mark.acceptance

BOMB_SIDE = 30_000
"""30000 x 30000 pixels: 2.7 GB as BGR, from a 110 KB PNG."""
BOMB_BOUND_MB = 100
RESULT_READERS = 10
RESULT_BOUND_MB = 64
"""Ten readers of a 64 MB result: read whole, they would hold 640 MB."""
DATASET_BOUND_MB = 50
IMPORT_BOUND_MB = 100
RUN_BOUND_MB = 300
"""An inference job of two images on a warm model; decoding the bomb would add 2.7 GB."""
YOLO_STARTUP_S = 180.0
JOB_TIMEOUT_S = 180.0


def png(width: int, height: int) -> bytes:
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (90, 120, 150)).save(buffer, format="PNG")
    return buffer.getvalue()


def test_a_png_bomb_upload_is_refused_from_its_header(
    server_factory: ServerFactory, tmp_path: Path
) -> None:
    server = server_factory()
    server.start()
    bomb = png_bomb(tmp_path / "bomb.png", BOMB_SIDE, BOMB_SIDE).read_bytes()
    with server.client() as client:
        fine = [("images", ("fine.png", png(64, 48), "image/png"))]
        warm = client.post("/v1/jobs/inference", data={"model": "sim"}, files=fine)
        assert warm.status_code == 202, warm.text  # the upload path has run once

        with PeakRss(server.pid) as memory:
            refused = client.post(
                "/v1/jobs/inference",
                data={"model": "sim"},
                files=[("images", ("bomb.png", bomb, "image/png"))],
            )

        assert refused.status_code == 422, refused.text
        assert refused.json()["code"] == "image_too_large"
        assert "max_image_pixels" in refused.json()["detail"]
        assert client.get("/healthz").status_code == 200
    assert memory.growth_mb < BOMB_BOUND_MB, f"RSS grew by {memory.growth_mb:.0f} MB"


def big_result(entries: int, detections: int) -> dict[str, Any]:
    box = {"x1": 12.25, "y1": 40.5, "x2": 310.75, "y2": 470.0}
    detection = {"class_id": 3, "class_name": "car", "confidence": 0.12345, "box": box}
    many = [detection] * detections
    return {
        "images": [
            {"source": f"img-{i:06d}.jpg", "width": 640, "height": 480, "detections": many}
            for i in range(entries)
        ]
    }


def test_a_large_result_is_streamed_from_disk_whole_and_in_pages(
    server_factory: ServerFactory,
) -> None:
    server = server_factory(inline_result_bytes=0)  # every result in its file
    server.start()
    with server.client() as client:
        job = wait_terminal(client, submit(client, sim_inference("one.jpg"))["id"], 30)
        assert job["state"] == "succeeded"
    # The simulated runtime makes small results; this is the file a real job with 20 000
    # images of 60 detections each leaves, written by the server's own writer.
    files = JobFiles(server.data_dir / "jobs", max_result_bytes=1 << 30)
    files.write_result(job["id"], big_result(20_000, 60))
    size = files.result_path(job["id"]).stat().st_size
    assert size > RESULT_BOUND_MB * 2**20
    url = f"{server.url}/v1/jobs/{job['id']}/result"

    def read_whole(_: int) -> int:
        with httpx.stream("GET", url, timeout=60) as response:
            assert response.status_code == 200
            return sum(len(chunk) for chunk in response.iter_bytes())

    def read_pages(_: int) -> int:
        seen, offset = 0, 0
        # A connection per page. uvicorn's keep-alive timer (5 s) starts once a page is sent,
        # while this thread, beside fifteen others, may still be draining the socket's few MB
        # of a 10 MB page and then parsing its 60,000 detections for seconds: a kept
        # connection can be closed by the server just as the next page is asked on it
        # ("Server disconnected without sending a response", twice in full runs).
        limits = httpx.Limits(max_keepalive_connections=0)
        with httpx.Client(timeout=60, limits=limits) as client:
            while offset is not None:
                page = client.get(url, params={"offset": offset, "limit": 1000}).json()
                seen += len(page["images"])
                offset = page["next_offset"]
        return seen

    read_pages(0)  # the route has run once
    with PeakRss(server.pid) as memory, ThreadPoolExecutor(2 * RESULT_READERS) as pool:
        wholes = pool.map(read_whole, range(RESULT_READERS))
        paged = pool.map(read_pages, range(RESULT_READERS))
        assert list(wholes) == [size] * RESULT_READERS
        assert list(paged) == [20_000] * RESULT_READERS

    assert memory.growth_mb < RESULT_BOUND_MB, f"RSS grew by {memory.growth_mb:.0f} MB"


@pytest.fixture(scope="module")
def yolo_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server on the real runtime (the host's GPUs, else its CPU) with one tiny model."""
    from yolo_orch.testing.yolo import build_checkpoint, ensure_ultralytics, make_images

    base = tmp_path_factory.mktemp("yolo-server")
    ensure_ultralytics(base)
    build_checkpoint(base / "models" / "tiny.pt")
    make_images(base / "data" / "images", 1)
    for split in ("train", "val"):
        (base / "data" / "ds" / "images" / split).mkdir(parents=True)
    server = Server(
        base / "var",
        base / "logs",
        "yolo",
        runtime="auto",
        data_roots=json.dumps([str(base / "data")]),
        model_roots=json.dumps([str(base / "models")]),
        cpu_threads=1,
    )
    try:
        server.start(timeout=YOLO_STARTUP_S)
        with server.client(timeout=120) as client:
            imported = client.post("/v1/models", json={"path": "tiny.pt", "name": "tiny"})
            assert imported.status_code in (200, 201), imported.text
        yield server
    finally:
        server.cleanup()


def data_root(server: Server) -> Path:
    return server.data_dir.parent / "data"


def test_an_input_past_max_image_pixels_is_an_error_entry_at_run_time(
    yolo_server: Server,
) -> None:
    png_bomb(data_root(yolo_server) / "images" / "bomb.png", BOMB_SIDE, BOMB_SIDE)
    body = {"kind": "inference", "model": "tiny", "params": {"imgsz": 128}}
    with yolo_server.client(timeout=60) as client:
        warm = submit(client, {**body, "inputs": ["images/*.jpg"]})
        assert wait_terminal(client, warm["id"], JOB_TIMEOUT_S)["state"] == "succeeded"

        with PeakRss(yolo_server.pid) as memory:
            job = submit(client, {**body, "inputs": ["images/bomb.png", "images/*.jpg"]})
            done = wait_terminal(client, job["id"], JOB_TIMEOUT_S)

        assert done["state"] == "succeeded", done
        bomb, photo = client.get(f"/v1/jobs/{job['id']}/result").json()["images"]
    assert bomb["source"] == "images/bomb.png"
    assert "max_image_pixels" in bomb["error"]
    assert "detections" in photo
    assert memory.growth_mb < RUN_BOUND_MB, f"RSS grew by {memory.growth_mb:.0f} MB"


HEAD = "path: .\ntrain: images/train\nval: images/val\n"


@pytest.mark.parametrize(
    ("name", "text", "code", "why"),
    [
        (
            "laughs",
            # 42 KB of YAML; 10 000 names of 2 KB, 20 MB, once expanded
            HEAD + f"s: &s {'x' * 2000}\nnames: [{', '.join(['*s'] * 10_000)}]\n",
            "invalid_dataset",
            "aliases are not accepted",
        ),
        (
            "deep",
            HEAD + "names: " + "[" * 50_000 + "]" * 50_000 + "\n",
            "invalid_dataset",
            "nests deeper than",
        ),
        (
            "wide",
            HEAD + "names: [" + ", ".join(f"class-{i}" for i in range(10_001)) + "]\n",
            "class_names_too_large",
            "max_class_names",
        ),
    ],
)
def test_a_hostile_dataset_is_refused_at_submission(
    yolo_server: Server, name: str, text: str, code: str, why: str
) -> None:
    (data_root(yolo_server) / "ds" / f"{name}.yaml").write_text(text)
    body = {"kind": "training", "model": "tiny", "dataset": f"ds/{name}.yaml"}
    with yolo_server.client(timeout=60) as client:
        with PeakRss(yolo_server.pid) as memory:
            response = client.post("/v1/jobs", json=body)

        assert response.status_code == 422, response.text
        assert response.json()["code"] == code
        assert why in response.json()["detail"]
        assert client.get("/v1/jobs", params={"kind": "training"}).json()["jobs"] == []
    assert memory.growth_mb < DATASET_BOUND_MB, f"RSS grew by {memory.growth_mb:.0f} MB"


def test_a_model_with_too_many_class_names_is_refused_at_import(yolo_server: Server) -> None:
    import torch

    models = yolo_server.data_dir.parent / "models"
    checkpoint = torch.load(models / "tiny.pt", weights_only=False)
    names = {i: f"class-{i:05d}-{'x' * 90}" for i in range(10_001)}
    for key in ("model", "ema"):
        if checkpoint.get(key) is not None:
            checkpoint[key].names = names
    torch.save(checkpoint, models / "wide.pt")
    with yolo_server.client(timeout=60) as client:
        with PeakRss(yolo_server.pid) as memory:
            response = client.post("/v1/models", json={"path": "wide.pt", "name": "wide"})

        assert response.status_code == 422, response.text
        assert response.json()["code"] == "class_names_too_large"
        assert [m["name"] for m in client.get("/v1/models").json()["models"]] == ["tiny"]
    assert memory.growth_mb < IMPORT_BOUND_MB, f"RSS grew by {memory.growth_mb:.0f} MB"
