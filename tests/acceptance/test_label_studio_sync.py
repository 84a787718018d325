"""Sync with a real Label Studio (`label_studio` fixture): a managed dataset's items pushed as
tasks with pre-annotations, annotations made in Label Studio pulled back as labels."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from yolo_orch.errors import LabelConfigInvalid, LabelStudioProjectNotFound
from yolo_orch.files.managed_datasets import ManagedDatasets
from yolo_orch.labelling.ls_sync import LabelStudioSync
from yolo_orch.testing.label_studio import LabelStudio

BOXES = (
    '<View><Image name="image" value="$image"/><RectangleLabels name="label" toName="image">'
    '<Label value="cat"/><Label value="dog"/></RectangleLabels></View>'
)
PUBLIC_URL = "http://yolo-orch.test:8000"


def jpeg(width: int = 200, height: int = 100) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (90, 120, 150)).save(buffer, format="JPEG")
    return buffer.getvalue()


@pytest.fixture
def datasets(tmp_path: Path) -> ManagedDatasets:
    managed = ManagedDatasets(tmp_path / "datasets")
    managed.create("pets", "detect", ["cat", "dog"])
    return managed


def new_project(label_studio: LabelStudio, config: str = BOXES) -> int:
    with label_studio.client() as client:
        response = client.post("/api/projects", json={"title": "sync test", "label_config": config})
    assert response.status_code == 201, response.text
    project: int = response.json()["id"]
    return project


def tasks_of(label_studio: LabelStudio, project: int) -> list[dict[str, Any]]:
    with label_studio.client() as client:
        response = client.get(
            "/api/tasks", params={"project": project, "page_size": 100, "fields": "all"}
        )
    assert response.status_code == 200, response.text
    tasks: list[dict[str, Any]] = response.json()["tasks"]
    return sorted(tasks, key=lambda task: task["id"])


async def test_push_sends_new_model_items_once_with_their_labels_as_predictions(
    label_studio: LabelStudio, datasets: ManagedDatasets
) -> None:
    first = datasets.add(
        "pets", jpeg(), ".jpg", ["1 0.5 0.5 0.5 0.5"], source="model", model_id="m1"
    )
    checked = datasets.add("pets", jpeg(), ".jpg", ["0 0.5 0.5 0.2 0.2"], source="annotation")
    project = new_project(label_studio)
    sync = LabelStudioSync(datasets, label_studio.url, label_studio.token)

    counts = await sync.push("pets", project, public_url=PUBLIC_URL)

    assert (counts.pushed, counts.already, counts.predictions) == (1, 0, 1)
    (task,) = tasks_of(label_studio, project)
    key = datasets.image_key("pets")
    assert task["data"]["image"] == f"{PUBLIC_URL}/v1/datasets/pets/items/{first}/image?key={key}"
    assert task["data"]["yolo_orch_item"] == first
    (predicted,) = task["predictions"]
    assert predicted["model_version"] == "m1"
    (region,) = predicted["result"]
    assert region["value"]["rectanglelabels"] == ["dog"]
    assert region["value"]["x"] == pytest.approx(25.0)
    assert region["value"]["width"] == pytest.approx(50.0)

    second = datasets.add("pets", jpeg(), ".jpg", [], source="model")
    again = await sync.push("pets", project, public_url=PUBLIC_URL, scope="all")

    assert (again.pushed, again.already, again.predictions) == (2, 1, 0)
    items = [task["data"]["yolo_orch_item"] for task in tasks_of(label_studio, project)]
    assert sorted(items) == sorted([first, checked, second])
    (annotated,) = [task for task in tasks_of(label_studio, project) if task["annotations"]]
    assert annotated["data"]["yolo_orch_item"] == checked
    assert datasets.get("pets").labelling["label_studio_pushed"] == {
        str(project): sorted([first, checked, second])
    }


async def test_pull_takes_the_latest_annotation_of_each_task_that_was_not_skipped(
    label_studio: LabelStudio, datasets: ManagedDatasets
) -> None:
    boxed = datasets.add("pets", jpeg(), ".jpg", ["1 0.5 0.5 0.5 0.5"], source="model")
    skipped = datasets.add("pets", jpeg(), ".jpg", ["1 0.5 0.5 0.5 0.5"], source="model")
    untouched = datasets.add("pets", jpeg(), ".jpg", ["0 0.5 0.5 0.5 0.5"], source="model")
    project = new_project(label_studio)
    sync = LabelStudioSync(datasets, label_studio.url, label_studio.token)
    await sync.push("pets", project, public_url=PUBLIC_URL)
    by_item = {
        task["data"]["yolo_orch_item"]: task["id"] for task in tasks_of(label_studio, project)
    }
    cat = {
        "from_name": "label",
        "to_name": "image",
        "type": "rectanglelabels",
        "original_width": 200,
        "original_height": 100,
        "value": {"x": 10, "y": 20, "width": 30, "height": 40, "rectanglelabels": ["cat"]},
    }
    with label_studio.client() as client:
        for task, body in [
            (by_item[boxed], {"result": [cat]}),
            (by_item[skipped], {"result": [], "was_cancelled": True}),
        ]:
            response = client.post(f"/api/tasks/{task}/annotations", json=body)
            assert response.status_code == 201, response.text

    counts = await sync.pull("pets", project)

    assert (counts.annotated, counts.updated, counts.unchanged) == (1, 1, 0)
    assert datasets.item_labels("pets", boxed) == ["0 0.250000 0.400000 0.300000 0.400000"]
    sources = {item.id: item.source for item in datasets.items("pets")}
    assert sources == {boxed: "annotation", skipped: "model", untouched: "model"}
    assert datasets.item_labels("pets", skipped) == ["1 0.5 0.5 0.5 0.5"]

    again = await sync.pull("pets", project)
    assert (again.annotated, again.updated, again.unchanged) == (1, 0, 1)


async def test_a_project_that_is_not_there_or_cannot_label_the_task_is_refused(
    label_studio: LabelStudio, datasets: ManagedDatasets
) -> None:
    datasets.add("pets", jpeg(), ".jpg", [], source="model")
    sync = LabelStudioSync(datasets, label_studio.url, label_studio.token)
    with pytest.raises(LabelStudioProjectNotFound):
        await sync.push("pets", 999_999, public_url=PUBLIC_URL)
    text_only = new_project(
        label_studio,
        '<View><Text name="text" value="$text"/><Choices name="c" toName="text">'
        '<Choice value="a"/></Choices></View>',
    )
    with pytest.raises(LabelConfigInvalid):
        await sync.push("pets", text_only, public_url=PUBLIC_URL)
    assert tasks_of(label_studio, text_only) == []
    assert "label_studio_pushed" not in datasets.get("pets").labelling
