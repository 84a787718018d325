"""Sliced inference on small objects: recall and images per second, whole-image against sliced
through the server, and sliced through the server against sahi's own `get_sliced_prediction` on
the same weights, in one run.

    python -m bench.slicing [--images 4] [--imgsz 256] [--size 256] [--overlap 0.2]
                            [--rounds 2] [--threads 2] [--sahi-batch 16]

Model: `small_shapes.train_shape_detector`, yolo11n trained for ~60 s on 128-pixel images of the
demo's shapes (15-28 pixels). Images: `--images` 2048x1536 images, each 16x12 unseen such images
side by side (`large_shape_image`, about 3,500 shapes in 4 images), saved as PNG.

Sides, all at conf 0.1, `max_det` 1000, the NMS/merge IoU 0.5 and the same `--threads` torch
threads (the server's `cpu_threads`; `torch.set_num_threads` in this process for sahi; default:
the cpu lane's, all cores but one; with other processes busy on a 2-core host, 2 threads ran the
same passes 2-5x slower than 1):
- server whole: one inference job of all the images at `--imgsz`, letterboxed whole.
- server sliced: the same job with `slice: {size, overlap, merge: "nms", iou: 0.5}`.
- sahi: `get_sliced_prediction` per image (sahi's `UltralyticsDetectionModel` on the same
  `.pt`, `image_size` `--imgsz`, the same slices, `postprocess_type` "NMS", metric IOU 0.5, no
  whole-image pass), with sahi's default `batch_size` 1, and again with `--sahi-batch`.

Images per second: the server's from the job's own run time (`finished_at - started_at`, which
includes decoding the PNGs); sahi's from the calls alone, on images decoded beforehand (RGB). The
first round of each side warms it up (model load, the predictor), and is not counted; each round
after runs every side once, in turn. Recall: the share of shapes a detection of their class covers
with IoU 0.5 or more. The headline: server sliced img/s over sahi's (target >= 1.5). Nothing is
asserted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from bench._server import running_server
from bench.inference_overhead import server_job_seconds
from yolo_orch.runners.inference import default_cpu_threads
from yolo_orch.testing import wait_terminal
from yolo_orch.testing.small_shapes import large_shape_image, recall, train_shape_detector
from yolo_orch.testing.yolo import ensure_ultralytics

MODEL = "shapes"
JOB_TIMEOUT_S = 900.0
CONF, MAX_DET, IOU = 0.1, 1000, 0.5
TARGET = 1.5

Truth = list[tuple[float, float, float, float, int]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--images", type=int, default=4)
    parser.add_argument("--imgsz", type=int, default=256)
    parser.add_argument("--size", type=int, default=256, help="slice side in pixels")
    parser.add_argument("--overlap", type=float, default=0.2)
    parser.add_argument("--rounds", type=int, default=2, help="counted rounds, after a warm-up")
    parser.add_argument(
        "--threads", type=int, default=default_cpu_threads(), help="torch threads, both sides"
    )
    parser.add_argument("--sahi-batch", type=int, default=16)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="yolo-orch-bench-slicing-") as tmp:
        root = Path(tmp)
        ensure_ultralytics(root)
        started = time.perf_counter()
        best = train_shape_detector(root / "train")
        print(f"trained in {time.perf_counter() - started:.0f} s")
        weights = root / "weights" / f"{MODEL}.pt"
        weights.parent.mkdir()
        shutil.copy(best, weights)
        data = root / "data"
        data.mkdir()
        made = [large_shape_image(data, seed=seed) for seed in range(1, args.images + 1)]
        truth = [shapes for _, shapes in made]
        sahi = Sahi(weights, args)
        with (
            running_server(
                runtime="auto",
                data_roots=[data],
                model_roots=[weights.parent],
                cpu_threads=args.threads,
                max_files_per_job=1000,
            ) as server,
            httpx.Client(base_url=server.url, timeout=120) as client,
        ):
            imported = client.post("/v1/models", json={"path": weights.name})
            if imported.status_code not in (200, 201):
                raise RuntimeError(f"model import: {imported.status_code} {imported.text}")
            slicing = {"size": args.size, "overlap": args.overlap, "merge": "nms", "iou": IOU}
            sides: dict[str, Callable[[], tuple[float, list[list[Any]]]]] = {
                "server whole": lambda: server_side(client, args.imgsz, None),
                "server sliced": lambda: server_side(client, args.imgsz, slicing),
                "sahi batch 1": lambda: sahi.run(1),
                f"sahi batch {args.sahi_batch}": lambda: sahi.run(args.sahi_batch),
            }
            runs: dict[str, list[float]] = {name: [] for name in sides}
            found: dict[str, list[list[Any]]] = {}
            for round_ in range(args.rounds + 1):
                for name, side in sides.items():
                    seconds, detections = side()
                    if round_:
                        runs[name].append(seconds)
                    found[name] = detections
    report(args, runs, found, truth)


def server_side(
    client: httpx.Client, imgsz: int, slicing: dict[str, Any] | None
) -> tuple[float, list[list[Any]]]:
    """One job of all the images: its run seconds, and each image's detections."""
    params: dict[str, Any] = {"imgsz": imgsz, "conf": CONF, "iou": IOU, "max_det": MAX_DET}
    if slicing is not None:
        params["slice"] = slicing
    body = {"kind": "inference", "model": MODEL, "inputs": ["large-*.png"], "params": params}
    response = client.post("/v1/jobs", json=body)
    if response.status_code != 202:
        raise RuntimeError(f"{response.status_code} {response.text}")
    job = wait_terminal(client, response.json()["id"], JOB_TIMEOUT_S)
    if job["state"] != "succeeded":
        raise RuntimeError(f"job ended {job['state']}: {job['error']}")
    images = client.get(f"/v1/jobs/{job['id']}/result").json()["images"]
    by_name = sorted(images, key=lambda entry: _seed(entry["source"]))
    return server_job_seconds(job), [entry["detections"] for entry in by_name]


def _seed(name: str) -> int:
    return int(Path(name).stem.rpartition("-")[2])


class Sahi:
    """sahi's own sliced prediction on the same `.pt`, in this process."""

    def __init__(self, weights: Path, args: argparse.Namespace) -> None:
        from sahi import AutoDetectionModel

        self.args = args
        self.model = AutoDetectionModel.from_pretrained(
            model_type="ultralytics",
            model_path=str(weights),
            confidence_threshold=CONF,
            device="cpu",
            image_size=args.imgsz,
        )
        paths = sorted(weights.parent.parent.glob("data/large-*.png"), key=lambda p: _seed(p.name))
        self.images = [_rgb(path) for path in paths]

    def run(self, batch: int) -> tuple[float, list[list[Any]]]:
        import torch
        from sahi.predict import get_sliced_prediction

        # here, not once: loading a model through ultralytics sets the process's count back
        torch.set_num_threads(self.args.threads)
        started = time.perf_counter()
        results = [
            get_sliced_prediction(
                image,
                self.model,
                slice_height=self.args.size,
                slice_width=self.args.size,
                overlap_height_ratio=self.args.overlap,
                overlap_width_ratio=self.args.overlap,
                perform_standard_pred=False,
                postprocess_type="NMS",
                postprocess_match_metric="IOU",
                postprocess_match_threshold=IOU,
                verbose=0,
                batch_size=batch,
            )
            for image in self.images
        ]
        seconds = time.perf_counter() - started
        detections = [
            [
                {
                    "class_id": p.category.id,
                    "box": dict(zip(("x1", "y1", "x2", "y2"), p.bbox.to_xyxy(), strict=True)),
                }
                for p in result.object_prediction_list
            ]
            for result in results
        ]
        return seconds, detections


def _rgb(path: Path) -> Any:
    import cv2

    pixels = cv2.imread(str(path))
    if pixels is None:
        raise FileNotFoundError(path)
    return cv2.cvtColor(pixels, cv2.COLOR_BGR2RGB)


def report(
    args: argparse.Namespace,
    runs: dict[str, list[float]],
    found: dict[str, list[list[Any]]],
    truth: list[Truth],
) -> None:
    shapes = sum(len(shapes) for shapes in truth)
    print(
        f"{args.images} images of 2048x1536, {shapes} shapes of 15-28 px; imgsz {args.imgsz}, "
        f"slices {args.size} px overlap {args.overlap}; {args.threads} torch threads, "
        f"{os.cpu_count()} CPUs; {args.rounds} rounds after a warm-up"
    )
    print(f"{'side':<16} {'img/s (median)':>14} {'per round':>24} {'recall':>7} {'found':>6}")
    rates: dict[str, float] = {}
    for name, seconds in runs.items():
        per_round = [args.images / s for s in seconds]
        rates[name] = statistics.median(per_round)
        hits = sum(recall(d, t)[0] for d, t in zip(found[name], truth, strict=True))
        count = sum(len(d) for d in found[name])
        listed = ", ".join(f"{rate:.2f}" for rate in per_round)
        print(f"{name:<16} {rates[name]:>14.2f} {listed:>24} {hits / shapes:>7.3f} {count:>6}")
    sliced = rates["server sliced"]
    for name in rates:
        if name.startswith("sahi"):
            ratio = sliced / rates[name]
            print(f"server sliced / {name}: {ratio:.2f} (target >= {TARGET})")


if __name__ == "__main__":
    main()
