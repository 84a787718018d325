"""Images/s of inference on the CPU lane for each format (`.pt`, ONNX Runtime, OpenVINO), through
the server and with ultralytics called directly, side by side in one run, each against direct
`.pt` predict.

    python -m bench.inference_formats [--imgsz 320 640] [--repeats 1]

One real server (`runtime = "auto"`, the cpu lane, a model cache big enough to keep every
instance warm) imports the checkpoint and exports it to ONNX and OpenVINO at each imgsz (static,
batch 1, FP32) with export jobs. Server: jobs with `params.format` "pt", "onnx", "openvino" and
"auto" over 1 and 32 images; then a dynamic OpenVINO variant is exported too, and "auto" and
"openvino" (which now pick it) are timed again; then a dynamic half one, and "auto" jobs with
`"half": true`, which run it in the CPU's 16-bit type (bfloat16 on AMX CPUs); the dynamic
variants are deleted before the next imgsz. Timed:
from POST /v1/jobs to the long poll (`Prefer: wait`) that returns it succeeded (e2e), and the job's
own `finished_at - started_at` (run).
Direct: the same files (the `.pt`, and the variants' files in the server's registry) loaded with
`YOLO(...)`, the images decoded as the server decodes them, one `predict(stream=True)` over the
list, the same imgsz, conf, iou, max_det and torch thread count as the server's cpu lane. ONNX
Runtime picks its own thread count on both sides. OpenVINO models are compiled on both sides as
the server's cpu lane compiles them (`compile_openvino_for_lane`: the lane's thread count, and
f32 for FP32 variants, where OpenVINO alone would run them in bfloat16 on AMX CPUs).
Every model is warmed up on both sides before anything is timed; server and direct runs
alternate, so load from other processes lands on both.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench._yolo import JOB_TIMEOUT_S, MODEL, inference_job, real_server, workspace
from bench.inference_overhead import Direct, server_job_seconds
from yolo_orch.testing import wait_terminal

SETS = {"one": 1, "batch32": 32}
EXPORTED = ("onnx", "openvino")
DYNAMIC = "openvino dynamic"
DYNAMIC_HALF = "openvino dynamic half"


@dataclass(frozen=True)
class Row:
    label: str
    server_format: str
    """What the server's jobs ask for (`params.format`)."""
    direct: str | None
    """Which files the direct side runs beside it (a key of the variants exported so far)."""
    baseline: str = "pt"
    """The row whose direct `.pt` times its ratios are against: one timed in the same phase."""
    half: bool = False
    """The jobs' `params.half`."""


STATIC_ROWS = (
    Row("pt", "pt", "pt"),
    Row("onnx", "onnx", "onnx"),
    Row("openvino", "openvino", "openvino"),
    Row("auto", "auto", None),
)
BESIDE_DYNAMIC = "pt, beside the dynamic rows"
DYNAMIC_ROWS = (
    Row(f"auto, {DYNAMIC} too", "auto", DYNAMIC, BESIDE_DYNAMIC),
    Row(DYNAMIC, "openvino", None, BESIDE_DYNAMIC),
)
"""Timed once the dynamic variant is registered: `auto` and a named `openvino` both pick it."""
BESIDE_HALF = "pt, beside the half rows"
HALF_ROWS = (Row("auto, half", "auto", DYNAMIC_HALF, BESIDE_HALF, half=True),)
"""Timed once a dynamic half variant is registered too: `half` jobs pick it."""
ROWS = STATIC_ROWS + DYNAMIC_ROWS + HALF_ROWS
BASELINES = (BESIDE_DYNAMIC, BESIDE_HALF)
TARGET_RATIO = 2.5
"""Issue 11: server `auto`, 32-image jobs, imgsz 320, vs direct `.pt` predict."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--imgsz", type=int, nargs="+", default=[320, 640])
    parser.add_argument("--repeats", type=int, default=1, help="timed runs of each 32-image job")
    parser.add_argument("--one-repeats", type=int, default=3, help="timed runs of 1-image jobs")
    args = parser.parse_args()

    runs = Runs()
    with workspace(SETS) as ws, real_server(ws, model_cache_size=16) as server:
        paths = {name: sorted((ws.data / name).glob("*.jpg")) for name in SETS}
        with httpx.Client(base_url=server.url, timeout=120) as client:
            for imgsz in args.imgsz:
                files = {"pt": ws.weights}
                for export_format in EXPORTED:
                    files[export_format] = exported_entry(
                        client, server.data_dir, export_format, imgsz, runs.labels
                    )
                direct = {name: Direct(path, imgsz) for name, path in files.items()}
                repeats = (args.one_repeats, args.repeats)
                measure(client, direct, paths, imgsz, runs, repeats, STATIC_ROWS)
                dynamic = exported_entry(
                    client, server.data_dir, "openvino", imgsz, runs.labels, dynamic=True
                )
                direct = {"pt": direct["pt"], DYNAMIC: Direct(dynamic, imgsz)}
                measure(client, direct, paths, imgsz, runs, repeats, DYNAMIC_ROWS)
                half = exported_entry(
                    client, server.data_dir, "openvino", imgsz, runs.labels, dynamic=True, half=True
                )
                direct = {"pt": direct["pt"], DYNAMIC_HALF: Direct(half, imgsz, half=True)}
                measure(client, direct, paths, imgsz, runs, repeats, HALF_ROWS)
                for entry in (dynamic, half):  # they run any imgsz: the next size's rows must not
                    variant = entry.parent.name
                    client.delete(f"/v1/models/{MODEL}/variants/{variant}").raise_for_status()
    report(runs, args.imgsz)


@dataclass
class Runs:
    server: dict[tuple[int, str, str], list[tuple[float, float]]] = field(default_factory=dict)
    """(imgsz, set, format) -> (e2e seconds, run seconds) per timed job."""
    direct: dict[tuple[int, str, str], list[float]] = field(default_factory=dict)
    ran: dict[tuple[int, str], str] = field(default_factory=dict)
    """(imgsz, row label) -> what the server's result says ran."""
    labels: dict[str, str] = field(default_factory=dict)
    """variant id -> its format, and `dynamic` where it is."""


def measure(
    client: httpx.Client,
    direct: dict[str, Direct],
    paths: dict[str, list[Path]],
    imgsz: int,
    runs: Runs,
    repeats: tuple[int, int],
    rows: tuple[Row, ...],
) -> None:
    for side in direct.values():  # load and warm up, untimed
        side.cold(paths["one"])
    for row in rows:
        job = run_server(client, "one/*.jpg", imgsz, row.server_format, row.half)
        result = job["result"]
        runs.ran[(imgsz, row.label)] = runs.labels.get(result["variant_id"], result["format"])
    for set_name, times in zip(SETS, repeats, strict=True):
        for _ in range(times):
            for row in rows:
                key = (imgsz, set_name, row.label)
                started = time.perf_counter()
                job = run_server(client, f"{set_name}/*.jpg", imgsz, row.server_format, row.half)
                e2e = time.perf_counter() - started
                runs.server.setdefault(key, []).append((e2e, server_job_seconds(job)))
                if row.direct is not None:
                    seconds = direct[row.direct].warm(paths[set_name])
                    runs.direct.setdefault(key, []).append(seconds)
            for baseline in {row.baseline for row in rows} & set(BASELINES):  # the phase's own
                seconds = direct["pt"].warm(paths[set_name])
                runs.direct.setdefault((imgsz, set_name, baseline), []).append(seconds)


def report(runs: Runs, sizes: list[int]) -> None:
    """A Markdown table: img/s of each side, and each against direct `.pt` predict of the same
    imgsz and job size (medians of the timed runs)."""
    from yolo_orch.runners.inference import default_cpu_threads

    print(
        f"{os.cpu_count()} CPUs, {default_cpu_threads()} torch thread(s), model {MODEL} "
        "(yolo11n), cpu lane"
    )
    print(
        "| imgsz | images | format | ran | direct img/s | server e2e img/s | server run img/s "
        "| direct/direct .pt | e2e/direct .pt | run/direct .pt |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for imgsz in sizes:
        for set_name, images in SETS.items():
            for row in ROWS:
                direct_pt = statistics.median(runs.direct[(imgsz, set_name, row.baseline)])
                key = (imgsz, set_name, row.label)
                e2e_s = statistics.median(e2e for e2e, _ in runs.server[key])
                run_s = statistics.median(run for _, run in runs.server[key])
                direct_s = statistics.median(runs.direct[key]) if key in runs.direct else None
                direct_cells = (
                    f"{images / direct_s:.1f} | {direct_pt / direct_s:.2f}" if direct_s else "- | -"
                ).split(" | ")
                print(
                    f"| {imgsz} | {images} | {row.label} | {runs.ran[(imgsz, row.label)]} "
                    f"| {direct_cells[0]} | {images / e2e_s:.1f} | {images / run_s:.1f} "
                    f"| {direct_cells[1]} | {direct_pt / e2e_s:.2f} | {direct_pt / run_s:.2f} |"
                )
    if 320 in sizes:
        for row in (STATIC_ROWS[-1], DYNAMIC_ROWS[0], HALF_ROWS[0]):
            direct_pt = statistics.median(runs.direct[(320, "batch32", row.baseline)])
            e2e_s = statistics.median(e2e for e2e, _ in runs.server[(320, "batch32", row.label)])
            verdict = "met" if direct_pt / e2e_s >= TARGET_RATIO else "not met"
            print(
                f"target: server {row.label}, 32-image jobs, imgsz 320, end to end >= "
                f"{TARGET_RATIO}x direct .pt predict: {direct_pt / e2e_s:.2f}x, {verdict}"
            )


def run_server(
    client: httpx.Client, pattern: str, imgsz: int, export_format: str, half: bool
) -> Any:
    body = inference_job([pattern], imgsz)
    body["params"].update(format=export_format, half=half)
    response = client.post("/v1/jobs", json=body)
    if response.status_code != 202:
        raise RuntimeError(f"{response.status_code} {response.text}")
    job = wait_terminal(client, response.json()["id"], JOB_TIMEOUT_S)
    if job["state"] != "succeeded":
        raise RuntimeError(f"job ended {job['state']}: {job['error']}")
    return job


def exported_entry(
    client: httpx.Client,
    data_dir: Path,
    export_format: str,
    imgsz: int,
    labels: dict[str, str],
    dynamic: bool = False,
    half: bool = False,
) -> Path:
    """Export the model with a job; the variant's file (or OpenVINO folder) in the registry.
    Records the variant's label in `labels`."""
    params = {"format": export_format, "imgsz": imgsz, "dynamic": dynamic, "half": half}
    response = client.post("/v1/jobs", json={"kind": "export", "model": MODEL, "params": params})
    if response.status_code != 202:
        raise RuntimeError(f"{response.status_code} {response.text}")
    job = wait_terminal(client, response.json()["id"], JOB_TIMEOUT_S)
    if job["state"] != "succeeded":
        raise RuntimeError(f"export ended {job['state']}: {job['error']}")
    variant_id = job["result"]["variant_id"]
    labels[variant_id] = " ".join(
        [export_format, *(["dynamic"] if dynamic else []), *(["half"] if half else [])]
    )
    [folder] = [path for path in data_dir.rglob(variant_id) if path.is_dir()]
    [entry] = list(folder.iterdir())
    return entry


if __name__ == "__main__":
    main()
