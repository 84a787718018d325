"""Inference on exported variants with the real runtime, on the CPU lane: `format: auto` picks
OpenVINO over ONNX, a named format runs that one, results match the `.pt`, a format the model
lacks is refused at submission, and a tampered variant fails its job and is passed over after."""

from __future__ import annotations

from tests.conftest import shots_job
from tests.support.export_host import IMGSZ, Detection, Host, detections, host, host_settings, infer
from tests.support.problems import assert_problem

__all__ = ["host", "host_settings"]  # the fixtures, shared with the export tests


def assert_close(got: list[list[Detection]], want: list[list[Detection]]) -> None:
    """fp32 formats: the same detections, boxes within 1 px, confidences within 1e-2."""
    assert len(got) == len(want)
    for got_image, want_image in zip(got, want, strict=True):
        assert len(got_image) == len(want_image)
        for a, b in zip(got_image, want_image, strict=True):
            assert all(abs(x - y) <= 1.0 for x, y in zip(a[:4], b[:4], strict=True)), (a, b)
            assert abs(a[4] - b[4]) <= 1e-2, (a, b)


async def test_auto_runs_openvino_a_named_format_runs_that_one_and_both_match_the_pt(
    host: Host,
) -> None:
    await host.import_tiny()
    onnx = (await host.export(format="onnx"))["result"]["variant_id"]
    openvino = (await host.export(format="openvino"))["result"]["variant_id"]

    auto = await infer(host)
    auto_again = await infer(host, format="auto")
    hits, loads = host.app.state.services.runtime.cache_stats()
    named = await infer(host, format="onnx")
    pt = await infer(host, format="pt")

    ran = [(job["result"]["format"], job["result"]["variant_id"]) for job in (auto, named, pt)]
    assert ran == [("openvino", openvino), ("onnx", onnx), ("pt", None)]
    reference = await detections(host, pt)
    assert reference
    assert all(reference), "the biased head detects class 0 everywhere"
    assert_close(await detections(host, auto), reference)
    assert_close(await detections(host, named), reference)
    assert auto_again["result"]["variant_id"] == openvino
    log = (await host.client.get(f"/v1/jobs/{auto['id']}/logs")).text
    assert f"runs openvino variant {openvino} on cpu" in log, log
    assert (hits, loads) == (1, 1)  # the second auto job found the OpenVINO instance warm


async def test_a_format_the_model_lacks_is_refused_at_submission_naming_what_it_has(
    host: Host,
) -> None:
    await host.import_tiny()
    await host.export(format="onnx")  # static, built for IMGSZ
    before = (await host.client.get("/v1/jobs")).json()["jobs"]

    refusals = [
        ({"format": "openvino", "imgsz": IMGSZ}, "pt, onnx"),
        ({"format": "engine", "imgsz": IMGSZ}, "pt, onnx"),
        ({"format": "onnx", "imgsz": 2 * IMGSZ}, "pt"),  # a static variant runs its size only
    ]
    for params, available in refusals:
        job = {"kind": "inference", "model": "tiny", "inputs": ["shots/*.jpg"], "params": params}
        response = await host.client.post("/v1/jobs", json=job)
        assert_problem(response, 422, "format_not_available")
        assert response.json()["detail"].endswith(f"formats it can run: {available}")
    unknown = {
        "kind": "inference",
        "model": "tiny",
        "inputs": ["shots/*.jpg"],
        "params": {"format": "tflite"},
    }
    assert_problem(await host.client.post("/v1/jobs", json=unknown), 422, "invalid_request")
    assert (await host.client.get("/v1/jobs")).json()["jobs"] == before

    # half applies on CUDA lanes only: on this host the fp32 variant serves it
    half_on_cpu = await infer(host, format="onnx", half=True)
    assert half_on_cpu["result"]["format"] == "onnx"


async def test_a_tampered_openvino_file_fails_the_job_and_the_next_auto_job_runs_onnx(
    host: Host,
) -> None:
    await host.import_tiny()
    onnx = (await host.export(format="onnx"))["result"]["variant_id"]
    openvino = (await host.export(format="openvino"))["result"]["variant_id"]
    weights = (await host.resolved(openvino)).entry / "model.bin"
    weights.write_bytes(weights.read_bytes()[:-8] + b"tampered")

    tampered = await infer(host)
    after = await infer(host)

    assert tampered["state"] == "failed"
    assert tampered["error"]["code"] == "model_tampered"
    by_id = {v["id"]: v for v in await host.variants()}
    assert by_id[openvino]["usable"] is False
    assert by_id[onnx]["usable"] is True
    assert (after["result"]["format"], after["result"]["variant_id"]) == ("onnx", onnx)
    named = await host.client.post("/v1/jobs", json=shots_job(IMGSZ, format="openvino"))
    assert_problem(named, 422, "format_not_available")


async def test_auto_prefers_a_dynamic_openvino_variant_which_runs_any_imgsz_like_the_pt(
    host: Host,
) -> None:
    await host.import_tiny()
    static = (await host.export(format="openvino"))["result"]["variant_id"]
    dynamic_job = await host.export(format="openvino", dynamic=True)
    dynamic = dynamic_job["result"]["variant_id"]
    by_id = {v["id"]: v for v in await host.variants()}
    assert by_id[dynamic]["lineage"]["dynamic"] is True

    auto = await infer(host)
    larger = await infer(host, imgsz=2 * IMGSZ)  # no static variant of this size
    pt, pt_larger = await infer(host, format="pt"), await infer(host, format="pt", imgsz=2 * IMGSZ)

    assert static != dynamic
    assert (auto["result"]["format"], auto["result"]["variant_id"]) == ("openvino", dynamic)
    assert larger["result"]["variant_id"] == dynamic
    assert_close(await detections(host, auto), await detections(host, pt))
    assert_close(await detections(host, larger), await detections(host, pt_larger))
