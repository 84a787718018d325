"""The labelling loop end to end on this host's CPU, timed stage by stage: from N captured images
to a promoted model.

    python -m bench.loop [--images 48] [--epochs 3] [--imgsz 128]

A real Label Studio (`yolo_orch.testing.label_studio`: its venv is built into the user's cache
on first use) and a real `yolo-orch serve` (`runtime = "auto"`) over the demo dataset
(`yolo_orch.demo.dataset`, `--images` training images of 128 px). The model is `build_checkpoint`'s
yolo11n with the demo's class names and random weights that find class 0 everywhere, imported
as `demo` and aliased `demo@production`; the managed dataset's `labelling` names that alias,
the training's `epochs` and `imgsz`, and a gate any trained model passes (`mAP50 >= 0`), so the
loop ends in a promotion.

The stages, each timed on the wall clock from this process:

- capture: an inference job over the N images with `capture: {when: {every_n: 1}}`, until the
  dataset holds what it captured (its summary says how many; images its full queue dropped
  are not there);
- push: POST /v1/datasets/{name}/push into a new Label Studio project (made with the SDK, this
  server connected to it as its ML backend);
- annotate: one SDK process submits an annotation for every task: its pre-annotation as it is
  (a person accepting each prediction; each submission waits for Label Studio's webhook to this
  server, which writes the labels into the dataset);
- train, validate, promote: the chain POST /ls/{dataset}/train starts once all are annotated,
  each step from its job's `started_at` to its `finished_at`.

Nothing is asserted; the chain's ids are printed for the record.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from bench._server import running_server
from yolo_orch.client import Client
from yolo_orch.demo.dataset import CLASS_NAMES, DatasetSpec, make_dataset
from yolo_orch.testing import wait_for
from yolo_orch.testing.label_studio import LabelStudio, running_label_studio
from yolo_orch.testing.yolo import build_checkpoint, ensure_ultralytics

DATASET = "loop"
CONFIG = (
    '<View><Image name="image" value="$image"/><RectangleLabels name="label" toName="image">'
    + "".join(f'<Label value="{name}"/>' for name in CLASS_NAMES)
    + "</RectangleLabels></View>"
)
ACCEPT_PREDICTIONS = """
for task in ls.tasks.list(project=args['project'], fields='all'):
    if task.predictions:
        result = [
            {key: value for key, value in region.items() if key != 'score'}
            for region in task.predictions[0].result
        ]
        ls.annotations.create(id=task.id, result=result)
result = None
"""


def ok(response: httpx.Response, status: int = 200) -> Any:
    if response.status_code != status:
        raise RuntimeError(f"{response.request.url}: {response.status_code} {response.text}")
    return response.json()


def timed(stages: dict[str, float], name: str, started: float) -> float:
    now = time.perf_counter()
    stages[name] = now - started
    return now


def finished(job: dict[str, Any]) -> dict[str, Any]:
    """A job or chain once it ended, else nothing (an empty dict)."""
    return {} if job["state"] in ("queued", "running") else job


def seconds(job: dict[str, Any]) -> float:
    started = datetime.fromisoformat(job["started_at"])
    return (datetime.fromisoformat(job["finished_at"]) - started).total_seconds()


def run(args: argparse.Namespace, root: Path, studio: LabelStudio) -> None:
    ensure_ultralytics(root)
    make_dataset(root / "data" / "demo", DatasetSpec(train=args.images, val=0, test=0))
    weights = build_checkpoint(root / "demo.pt", CLASS_NAMES)
    labelling = {
        "model": "demo@production",
        "train": {"epochs": args.epochs, "imgsz": args.imgsz, "batch": 8},
        "predict": {"imgsz": args.imgsz},
        "gate": {"metric": "mAP50", "min": 0},
    }
    stages: dict[str, float] = {}
    with running_server(
        runtime="auto",
        data_roots=[root / "data"],
        max_files_per_job=10_000,
        label_studio_url=studio.url,
        label_studio_token=studio.token,
    ) as server:
        with Client(server.url) as yolo:
            first = yolo.import_model(weights, name="demo")[0]
            yolo.set_alias("demo", "production", first.id)
        with server.client(timeout=600) as client:
            body = {"name": DATASET, "task": "detect", "names": CLASS_NAMES, "labelling": labelling}
            ok(client.post("/v1/datasets", json=body), 201)
            started = time.perf_counter()
            capture = {"into": DATASET, "when": {"every_n": 1}, "max_total": args.images}
            job = ok(
                client.post(
                    "/v1/jobs",
                    json={
                        "kind": "inference",
                        "model": "demo@production",
                        "inputs": ["demo/images/train/*.png"],
                        "params": {"imgsz": args.imgsz, "capture": capture},
                    },
                ),
                202,
            )
            ended = wait_for(
                lambda: finished(ok(client.get(f"/v1/jobs/{job['id']}"))),
                timeout=600,
                what="the capturing job",
                interval=0.1,
            )
            captured = ended["result"]["capture"]["captured"]
            wait_for(
                lambda: ok(client.get(f"/v1/datasets/{DATASET}"))["items"] >= captured,
                timeout=120,
                what="the captured items",
                interval=0.1,
            )
            started = timed(stages, "capture", started)
            project = studio.run_sdk(
                "result = ls.projects.create(title='bench loop', label_config=args['config']).id",
                {"config": CONFIG},
            )
            studio.run_sdk(
                "ls.ml.create(project=args['project'], url=args['url'], title='yolo-orch')",
                {"project": project, "url": f"{server.url}/ls/{DATASET}"},
            )
            started = time.perf_counter()
            pushed = ok(client.post(f"/v1/datasets/{DATASET}/push", json={"project": project}))
            started = timed(stages, "push", started)
            studio.run_sdk(ACCEPT_PREDICTIONS, {"project": project})
            timed(stages, "annotate", started)
            chain_id = ok(client.post(f"/ls/{DATASET}/train"), 201)["job"]
            chain = wait_for(
                lambda: finished(ok(client.get(f"/v1/chains/{chain_id}"))),
                timeout=3600,
                what="the chain to end",
                interval=0.5,
            )
            training, validation, promotion = chain["steps"]
            stages["train"] = seconds(training)
            stages["validate"] = seconds(validation)
            stages["promote"] = seconds(promotion)
    print(f"{args.images} images of {args.imgsz} px, {args.epochs} epochs, on the CPU")
    print(f"capture job {job['id']}: {ended['result']['capture']}")
    print(f"pushed {pushed['pushed']} tasks to project {project}")
    print(f"chain {chain_id}: {chain['state']}, promoted {chain['promoted']}")
    for step in chain["steps"]:
        print(f"  {step['kind']:<10} job {step['id']} {step['state']}, {seconds(step):.2f} s")
    for name, value in stages.items():
        print(f"{name:<10} {value:>8.2f} s")
    print(f"{'total':<10} {sum(stages.values()):>8.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=48)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--imgsz", type=int, default=128)
    args = parser.parse_args()
    with running_label_studio() as studio, tempfile.TemporaryDirectory() as tmp:
        run(args, Path(tmp), studio)


if __name__ == "__main__":
    main()
