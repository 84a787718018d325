"""The labelling loop end to end, with a real Label Studio and a real `yolo-orch serve` running
tiny real models on the CPU: an inference job captures its frames into a managed dataset; the
dataset is pushed to a Label Studio project (made with the SDK) whose ML backend (connected with
the SDK) is this server; Label Studio asks the backend for predictions of its own uploaded
images; annotations submitted through the SDK reach the dataset through the backend's webhook
(a pull then finds them there already); the last one starts the training chain, whose gate
passes, and the alias moves to the trained model."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image

from yolo_orch.client import Client
from yolo_orch.testing import Server, wait_for
from yolo_orch.testing.label_studio import LabelStudio
from yolo_orch.testing.training import make_dataset
from yolo_orch.testing.yolo import CLASS_NAMES, build_checkpoint, ensure_ultralytics

DATASET = "shapes"
TRAIN_AFTER = 3
CONFIG = (
    '<View><Image name="image" value="$image"/><RectangleLabels name="label" toName="image">'
    + "".join(f'<Label value="{name}"/>' for name in CLASS_NAMES)
    + "</RectangleLabels></View>"
)


@pytest.fixture
def server(tmp_path: Path, label_studio: LabelStudio) -> Iterator[Server]:
    ensure_ultralytics(tmp_path)
    make_dataset(tmp_path / "data" / "shots", n_train=6, n_val=0)
    served = Server(
        tmp_path / "var",
        tmp_path / "logs",
        runtime="auto",
        data_roots=[tmp_path / "data"],
        label_studio_url=label_studio.url,
        label_studio_token=label_studio.token,
        log_level="warning",
    )
    served.settings["label_studio_public_url"] = served.url
    try:
        served.start(timeout=120)
        yield served
    finally:
        served.cleanup()


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


def tasks_of(label_studio: LabelStudio, project: int) -> list[dict[str, Any]]:
    with label_studio.client() as client:
        found = ok(client.get("/api/tasks", params={"project": project, "fields": "all"}))
    return sorted(found["tasks"], key=lambda task: task["id"])


def upload(label_studio: LabelStudio, project: int, count: int) -> None:
    """Images uploaded to Label Studio itself: tasks whose image only Label Studio holds."""
    files = []
    for index in range(count):
        buffer = io.BytesIO()
        Image.new("RGB", (64, 64), (40 * index, 80, 120)).save(buffer, format="JPEG")
        files.append((f"file{index}", (f"upload-{index}.jpg", buffer.getvalue(), "image/jpeg")))
    with label_studio.client() as client:
        ok(client.post(f"/api/projects/{project}/import", files=files), 201)


def test_capture_push_predict_annotate_train_promote(
    server: Server, label_studio: LabelStudio, tmp_path: Path
) -> None:
    weights = build_checkpoint(tmp_path / "v1.pt")  # finds class 0 all over any image
    with Client(server.url) as yolo:
        first = yolo.import_model(weights, name="shapes")[0]
        yolo.set_alias("shapes", "production", first.id)
    with server.client(timeout=60) as client:
        labelling = {
            "model": "shapes@production",
            "train_after": TRAIN_AFTER,
            "train": {"epochs": 1, "imgsz": 64, "batch": 4},
            "predict": {"imgsz": 64},
            "gate": {"metric": "mAP50", "min": 0},
        }
        ok(
            client.post(
                "/v1/datasets",
                json={
                    "name": DATASET,
                    "task": "detect",
                    "names": CLASS_NAMES,
                    "labelling": labelling,
                },
            ),
            201,
        )
        # 1. Capture: every frame of an inference job, with the model's boxes as labels.
        job = ok(
            client.post(
                "/v1/jobs",
                json={
                    "kind": "inference",
                    "model": "shapes@production",
                    "inputs": ["shots/images/train/*.png"],
                    "params": {"imgsz": 64, "capture": {"into": DATASET, "when": {"every_n": 1}}},
                },
            ),
            202,
        )
        wait_for(
            lambda: (j := ok(client.get(f"/v1/jobs/{job['id']}")))["state"] == "succeeded" and j,
            timeout=120,
            what="the capturing inference job",
        )
        wait_for(
            lambda: (
                (d := ok(client.get(f"/v1/datasets/{DATASET}")))["sources"].get("model") == 6 and d
            ),
            timeout=30,
            what="the 6 captured items",
        )

        # 2. A project made with the SDK, this server connected as its ML backend.
        project = label_studio.run_sdk(
            "result = ls.projects.create(title='yolo-orch loop', label_config=args['config']).id",
            {"config": CONFIG},
        )
        assert isinstance(project, int)
        backend = label_studio.run_sdk(
            "result = ls.ml.create(project=args['project'], url=args['url'], title='yolo-orch').id",
            {"project": project, "url": f"{server.url}/ls/{DATASET}"},
        )
        assert isinstance(backend, int)

        # 3. Push: one task per captured item, its labels as the prediction of the model.
        pushed = ok(client.post(f"/v1/datasets/{DATASET}/push", json={"project": project}))
        assert (pushed["pushed"], pushed["predictions"]) == (6, 6)
        assert (
            ok(client.post(f"/v1/datasets/{DATASET}/push", json={"project": project}))["pushed"]
            == 0
        )
        tasks = tasks_of(label_studio, project)
        assert len(tasks) == 6
        assert {task["predictions"][0]["model_version"] for task in tasks} == {first.id}

        # 4. Predictions asked of the backend for images Label Studio holds itself.
        upload(label_studio, project, 2)
        with label_studio.client(timeout=180) as studio:
            ok(
                studio.post(
                    "/api/dm/actions",
                    params={"id": "retrieve_tasks_predictions", "project": project},
                    json={"selectedItems": {"all": True, "excluded": []}},
                )
            )
        uploaded = [
            task for task in tasks_of(label_studio, project) if "/upload/" in task["data"]["image"]
        ]
        assert len(uploaded) == 2
        for task in uploaded:
            (predicted,) = task["predictions"]
            assert predicted["model_version"] == first.id
            assert predicted["result"], "the checkpoint finds class 0 everywhere"
            assert predicted["result"][0]["value"]["rectanglelabels"] == [CLASS_NAMES[0]]

        # 5. Annotations through the SDK: the webhook writes them; the last starts a chain.
        annotated = tasks[:TRAIN_AFTER]
        for index, task in enumerate(annotated):
            box = {"x": 10 + index, "y": 20, "width": 50, "height": 40}
            label_studio.run_sdk(
                "ls.annotations.create(id=args['task'], result=args['result'])",
                {
                    "task": task["id"],
                    "result": [
                        {
                            "from_name": "label",
                            "to_name": "image",
                            "type": "rectanglelabels",
                            "original_width": 64,
                            "original_height": 64,
                            "value": {**box, "rectanglelabels": [CLASS_NAMES[1]]},
                        }
                    ],
                },
            )
        dataset = wait_for(
            lambda: (
                "last_chain" in (d := ok(client.get(f"/v1/datasets/{DATASET}")))["labelling"] and d
            ),
            timeout=60,
            what="the chain the annotations start",
        )
        assert dataset["sources"] == {"model": 6 - TRAIN_AFTER, "annotation": TRAIN_AFTER}
        pulled = ok(client.post(f"/v1/datasets/{DATASET}/pull", json={"project": project}))
        assert (pulled["annotated"], pulled["updated"], pulled["unchanged"]) == (
            TRAIN_AFTER,
            0,
            TRAIN_AFTER,
        ), "the pull finds what the webhook wrote"

        # 6. The chain: train on the dataset, validate, promote past the gate.
        chain_id = dataset["labelling"]["last_chain"]
        chain = wait_for(
            lambda: (
                (c := ok(client.get(f"/v1/chains/{chain_id}")))["state"]
                not in ("queued", "running")
                and c
            ),
            timeout=400,
            what="the training chain",
            interval=1.0,
        )
        assert chain["state"] == "succeeded", chain
        assert chain["promoted"] is True
        trained = chain["steps"][0]["result"]["model_id"]
        alias = ok(client.get("/v1/models/shapes/aliases/production"))
        assert alias["model_id"] == trained != first.id
