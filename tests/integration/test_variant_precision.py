"""Reduced-precision OpenVINO variants on the CPU lane: FP16 and INT8 exports are what they claim
(FP16 weights, quantised operations), load the way the server loads them, and stay within the
tolerances the README states against the `.pt`:

| variant | boxes | confidences | detections |
|---|---|---|---|
| fp32 | 1 px | 1e-2 | the same |
| half | 2 px | 2e-2 | the same |
| int8 | 4 px | 5e-2 | the same |
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio.to_thread

from tests.conftest import wait_terminal
from tests.support.export_host import IMGSZ, Detection, Host, detections, host, host_settings, infer
from yolo_orch.params.inference import InferenceParams
from yolo_orch.registry.resolutions import ResolvedVariant
from yolo_orch.registry.weights import ResolvedWeights, sha256_file
from yolo_orch.runners.predict import load_exported, load_model, predict_batch
from yolo_orch.testing.training import make_dataset

__all__ = ["host", "host_settings"]  # the fixtures, shared with the export tests


@dataclass(frozen=True)
class Tolerance:
    box_px: float
    confidence: float


FP32 = Tolerance(box_px=1.0, confidence=1e-2)
HALF = Tolerance(box_px=2.0, confidence=2e-2)
INT8 = Tolerance(box_px=4.0, confidence=5e-2)


def assert_within(
    got: list[list[Detection]], want: list[list[Detection]], tolerance: Tolerance
) -> None:
    assert len(got) == len(want)
    for got_image, want_image in zip(got, want, strict=True):
        assert len(got_image) == len(want_image)
        for a, b in zip(got_image, want_image, strict=True):
            assert all(abs(x - y) <= tolerance.box_px for x, y in zip(a[:4], b[:4], strict=True))
            assert abs(a[4] - b[4]) <= tolerance.confidence, (a, b)


def ir_text(resolved: ResolvedVariant) -> str:
    return next(resolved.entry.glob("*.xml")).read_text()


def loader_detections(model: Any, image: Path) -> list[list[Detection]]:
    """Predict `image` with the server's own predict call (`predict_batch`)."""
    import cv2

    pixels: Any = cv2.imread(str(image))
    params = InferenceParams(imgsz=IMGSZ)
    [(_, result)] = list(predict_batch(model, [(0, pixels)], "cpu", params))
    boxes: Any = result.boxes
    rows = zip(boxes.xyxy.tolist(), boxes.conf.tolist(), strict=True)
    return [sorted((*box, conf) for box, conf in rows)]


@dataclass(frozen=True)
class Compiled:
    """How the runner compiled an OpenVINO variant."""

    threads: int
    precision: str


def cpu_default_precision() -> str:
    """What OpenVINO's CPU plugin runs models in unless told: bf16 on CPUs with AMX or AVX-512
    BF16 (like this project's CI machine), f32 on others."""
    import openvino

    return str(openvino.Core().get_property("CPU", "INFERENCE_PRECISION_HINT").to_string())


def load_both(weights: Path, resolved: ResolvedVariant) -> tuple[Any, Any, Compiled]:
    """The `.pt` and the variant as the inference runner loads them on the cpu lane (one torch
    thread, as `cpu_threads` gives it on 2 cores), and how its OpenVINO model was compiled."""
    import torch

    torch.set_num_threads(1)
    params = InferenceParams(imgsz=IMGSZ)
    pt = load_model("cpu", ResolvedWeights(weights, sha256_file(weights)), params)
    variant = load_exported("cpu", resolved, "detect", params)
    predictor: Any = variant.predictor
    compiled = predictor.model.backend.ov_compiled_model
    precision = str(compiled.get_property("INFERENCE_PRECISION_HINT").to_string())
    return pt, variant, Compiled(int(compiled.get_property("INFERENCE_NUM_THREADS")), precision)


async def test_a_full_precision_openvino_variant_runs_in_f32_whatever_the_cpu_prefers(
    host: Host,
) -> None:
    await host.import_tiny()
    job = await host.export(format="openvino")
    assert job["state"] == "succeeded", job["error"]
    resolved = await host.resolved(job["result"]["variant_id"])

    weights = host.registry.path_of(await host.registry.get("tiny"))
    pt, variant, compiled = await anyio.to_thread.run_sync(load_both, weights, resolved)
    image = host.data / "shots" / "img0.jpg"
    want = await anyio.to_thread.run_sync(loader_detections, pt, image)
    got = await anyio.to_thread.run_sync(loader_detections, variant, image)

    # OpenVINO would run it in bfloat16 on an AMX CPU: tens of pixels off on sensitive models
    assert compiled.precision == "f32"
    assert compiled.threads == 1
    assert want[0], "the biased head detects class 0 everywhere"
    assert_within(got, want, FP32)


async def test_a_half_openvino_variant_has_fp16_weights_and_stays_within_its_tolerance(
    host: Host,
) -> None:
    await host.import_tiny()
    job = await host.export(format="openvino", half=True)
    assert job["state"] == "succeeded", job["error"]
    resolved = await host.resolved(job["result"]["variant_id"])
    assert resolved.variant.lineage.half is True
    assert 'element_type="f16"' in ir_text(resolved)

    weights = host.registry.path_of(await host.registry.get("tiny"))
    pt, variant, compiled = await anyio.to_thread.run_sync(load_both, weights, resolved)
    image = host.data / "shots" / "img0.jpg"
    want = await anyio.to_thread.run_sync(loader_detections, pt, image)
    got = await anyio.to_thread.run_sync(loader_detections, variant, image)

    assert want[0], "the biased head detects class 0 everywhere"
    assert_within(got, want, HALF)
    assert compiled.threads == 1  # OpenVINO runs on the lane's threads, not on every core
    assert compiled.precision == cpu_default_precision()  # the CPU's fastest 16-bit type, if any

    half_job, full_job = await infer(host, half=True), await infer(host)
    assert (half_job["result"]["format"], half_job["result"]["variant_id"]) == (
        "openvino",
        resolved.variant.id,
    )
    assert full_job["result"]["format"] == "pt"  # a full-precision job never runs it


async def test_an_int8_openvino_variant_is_quantised_runs_when_named_and_stays_within_its_tolerance(
    host: Host,
) -> None:
    await host.import_tiny()
    make_dataset(host.data / "calibration", n_train=2, n_val=2)
    export = {
        "kind": "export",
        "model": "tiny",
        "dataset": "calibration/data.yaml",
        "params": {"format": "openvino", "int8": True, "imgsz": IMGSZ},
    }
    response = await host.client.post("/v1/jobs", json=export)
    assert response.status_code == 202, response.text
    job = await wait_terminal(host.client, response.json()["id"], deadline_s=120)
    assert job["state"] == "succeeded", job["error"]
    int8 = job["result"]["variant_id"]
    resolved = await host.resolved(int8)
    assert resolved.variant.lineage.int8 is True
    assert "FakeQuantize" in ir_text(resolved)

    named = await infer(host, format="openvino")
    auto = await infer(host)
    pt = await infer(host, format="pt")

    assert (named["result"]["format"], named["result"]["variant_id"]) == ("openvino", int8)
    assert auto["result"]["format"] == "pt"  # auto never trades accuracy for speed
    want = await detections(host, pt)
    assert want[0], "the biased head detects class 0 everywhere"
    assert_within(await detections(host, named), want, INT8)
