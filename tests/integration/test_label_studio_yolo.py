"""Label Studio predictions from real CPU models of each task a managed dataset holds: one
inference job, results of the project's controls, and those results read back as an annotation
give the YOLO lines the capture writes for the job's own entries."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import orjson
import pytest
from fastapi import FastAPI

from tests.conftest import serve
from yolo_orch.app import create_app
from yolo_orch.config import Settings
from yolo_orch.domain.managed_datasets import MANAGED_TASKS
from yolo_orch.files.managed_datasets import ManagedDatasets
from yolo_orch.labelling.ls_config import parse_label_config
from yolo_orch.labelling.ls_results import yolo_lines
from yolo_orch.labelling.yolo_labels import label_lines
from yolo_orch.testing.yolo import (
    CLASS_NAMES,
    build_task_checkpoint,
    ensure_ultralytics,
    make_images,
)

KPT_SHAPE = (17, 3)
LABELS = "".join(f"<Label value='{name}'/>" for name in CLASS_NAMES)
POINTS = "".join(f"<Label value='kp{index}'/>" for index in range(KPT_SHAPE[0]))
CONTROLS = {
    "detect": f"<RectangleLabels name='box' toName='image'>{LABELS}</RectangleLabels>",
    "obb": f"<RectangleLabels name='box' toName='image'>{LABELS}</RectangleLabels>",
    "segment": f"<PolygonLabels name='poly' toName='image'>{LABELS}</PolygonLabels>",
    "pose": f"<RectangleLabels name='box' toName='image'>{LABELS}</RectangleLabels>"
    f"<KeyPointLabels name='kp' toName='image'>{POINTS}</KeyPointLabels>",
    "classify": "<Choices name='class' toName='image'>"
    + "".join(f"<Choice value='{name}'/>" for name in CLASS_NAMES)
    + "</Choices>",
}
TYPES = {
    "detect": {"rectanglelabels"},
    "obb": {"rectanglelabels"},
    "segment": {"polygonlabels"},
    "pose": {"rectanglelabels", "keypointlabels"},
    "classify": {"choices"},
}


@pytest.fixture(scope="module")
def model_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ensure_ultralytics(tmp_path_factory.getbasetemp())
    root = tmp_path_factory.mktemp("weights")
    for task in MANAGED_TASKS:
        build_task_checkpoint(root / f"{task}.pt", task)
    return root


@pytest.fixture
async def app(
    tmp_path: Path, model_root: Path, settings_factory: Callable[..., Settings]
) -> AsyncIterator[FastAPI]:
    data = tmp_path / "data"
    data.mkdir()
    app = create_app(
        settings_factory(
            runtime="auto", database_url="", data_roots=[data], model_roots=[model_root]
        )
    )
    async with serve(app) as client:
        app.state.test_client = client
        yield app


@pytest.mark.parametrize("task", MANAGED_TASKS)
async def test_predictions_of_a_real_model_and_their_lines_back(app: FastAPI, task: str) -> None:
    client: httpx.AsyncClient = app.state.test_client
    imported = await client.post("/v1/models", json={"path": f"{task}.pt"})
    assert imported.status_code == 201, imported.text
    model_id = imported.json()["id"]
    store: ManagedDatasets = app.state.services.datasets
    kpt_shape = KPT_SHAPE if task == "pose" else None
    # An untrained model: a low `conf` so that it predicts something to convert.
    predict: dict[str, object] = {"imgsz": 64}
    if task != "classify":
        predict |= {"conf": 0.001, "max_det": 5}
    store.create("ds", task, CLASS_NAMES, kpt_shape, {"model": task, "predict": predict})
    images = make_images(Path(app.state.services.settings.data_roots[0]) / "shots", 2)
    labels = ["0"] if task == "classify" else []
    items = [store.add("ds", path.read_bytes(), ".jpg", labels, source="model") for path in images]
    config = f"<View><Image name='image' value='$image'/>{CONTROLS[task]}</View>"
    tasks = [
        {"id": n, "data": {"image": f"/v1/datasets/ds/items/{item}/image"}}
        for n, item in enumerate(items)
    ]

    response = await client.post("/ls/ds/predict", json={"tasks": tasks, "label_config": config})

    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert [each["model_version"] for each in results] == [model_id, model_id]
    kinds = {item["type"] for each in results for item in each["result"]}
    assert kinds == TYPES[task]
    jobs = (await client.get("/v1/jobs?kind=inference")).json()["jobs"]
    assert len(jobs) == 1
    entries = orjson.loads((await client.get(f"/v1/jobs/{jobs[0]['id']}/result")).content)
    parsed = parse_label_config(config)
    for each, entry in zip(results, entries["images"], strict=True):
        back = yolo_lines(each["result"], task, CLASS_NAMES, parsed, kpt_shape)
        expected = label_lines(task, entry, CLASS_NAMES, kpt_shape)
        assert len(back) == len(expected)
        for ours, theirs in zip(back, expected, strict=True):
            assert [float(v) for v in ours.split()] == pytest.approx(
                [float(v) for v in theirs.split()],
                abs=5e-5,  # obb: corners from the entry's rounded centre, size and angle
            )
