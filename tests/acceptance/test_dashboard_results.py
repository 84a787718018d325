"""Every kind's result on its job page (issue 41), in Chromium: a tracked video plays and pages
its frames and tracks, a validation shows its classes, scores chart and confusion matrix, an
export its variant with a download that answers, a training the model it registered, a tune its
trials with the best one marked and a param plotted against the objective.

The video, validation, export and training jobs are real: a tiny untrained yolo11n on the CPU
(`runtime: auto`), on a generated 30-frame clip and a generated 3-class dataset at imgsz 64,
submitted together once for the module (about 20 s on two cores). The tune runs on the harness's
simulated server, its trials simulated trainings. Screenshots: test-artifacts/dashboard-job-*.png.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import BrowserContext

from tests.dashboard_harness import (
    ADMIN_TOKEN,
    JOBS_TOKEN,
    Network,
    api,
    browser,
    context,
    network,
    screenshot,
    server,
    signed_in,
    submit,
)
from yolo_orch import testing
from yolo_orch.testing import Server

pytestmark = pytest.mark.acceptance
__all__ = ["api", "browser", "context", "network", "server"]  # the fixtures this module uses

IMGSZ = 64
FRAMES = 30
REAL_TIMEOUT_S = 180


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server on the real runtime with a tiny model, a clip and a dataset under its roots."""
    if importlib.util.find_spec("ultralytics") is None:  # imported only once configured
        pytest.skip("ultralytics is not installed")
    from yolo_orch.testing.training import make_dataset
    from yolo_orch.testing.video import make_video
    from yolo_orch.testing.yolo import build_checkpoint, ensure_ultralytics

    tmp = tmp_path_factory.mktemp("dashboard-results")
    data, weights = tmp / "roots", tmp / "weights"
    ensure_ultralytics(tmp_path_factory.getbasetemp())
    make_video(data / "clips" / "clip.mp4", frames=FRAMES)
    make_dataset(data / "shapes")
    build_checkpoint(weights / "tiny.pt")
    tokens = [
        {"sha256": hashlib.sha256(ADMIN_TOKEN.encode()).hexdigest(), "scope": "admin"},
        {"sha256": hashlib.sha256(JOBS_TOKEN.encode()).hexdigest(), "scope": "jobs"},
    ]
    server = Server(
        tmp / "data",
        tmp / "logs",
        "dashboard-results",
        runtime="auto",
        tokens=json.dumps(tokens),
        data_roots=json.dumps([str(data)]),
        model_roots=json.dumps([str(weights)]),
    )
    try:
        server.start(timeout=120)  # imports torch and ultralytics: slow on a busy host
        yield server
    finally:
        server.cleanup()


@pytest.fixture(scope="module")
def real_api(real: Server) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=real.url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=30
    ) as client:
        yield client


@pytest.fixture(scope="module")
def real_jobs(real_api: httpx.Client) -> dict[str, str]:
    """One job of each real kind, submitted together: they run while the first tests wait."""
    response = real_api.post("/v1/models", json={"path": "tiny.pt"})
    assert response.status_code == 201, response.text
    jobs: dict[str, dict[str, Any]] = {
        "video": {
            "kind": "inference",
            "model": "tiny",
            "inputs": ["clips/clip.mp4"],
            "params": {"imgsz": IMGSZ, "track": "bytetrack", "save_annotated": True, "max_det": 3},
        },
        "validation": {
            "kind": "validation",
            "model": "tiny",
            "dataset": "shapes/data.yaml",
            "params": {"imgsz": IMGSZ},
        },
        "export": {
            "kind": "export",
            "model": "tiny",
            "params": {"format": "torchscript", "imgsz": IMGSZ},
        },
        "training": {
            "kind": "training",
            "model": "tiny",
            "dataset": "shapes/data.yaml",
            "params": {"epochs": 1, "imgsz": IMGSZ, "batch": 8, "output_name": "tiny-trained"},
        },
    }
    return {name: submit(real_api, **job) for name, job in jobs.items()}


def succeeded(client: httpx.Client, job_id: str) -> dict[str, Any]:
    job = testing.wait_terminal(client, job_id, timeout=REAL_TIMEOUT_S)
    assert job["state"] == "succeeded", job
    result: dict[str, Any] = client.get(f"/v1/jobs/{job_id}/result").json()
    return result


def test_a_tracked_video_plays_and_pages_its_frames_and_tracks(
    context: BrowserContext,
    real: Server,
    real_api: httpx.Client,
    real_jobs: dict[str, str],
    network: Network,
) -> None:
    job_id = real_jobs["video"]
    entry = succeeded(real_api, job_id)["images"][0]
    assert entry["tracks"]["count"] >= 1
    page = signed_in(context, real)
    page.goto(f"{real.url}/#/jobs/{job_id}")
    page.wait_for_selector(".video-result video.annotated")
    page.wait_for_function(
        "() => document.querySelector('video.annotated').readyState >= 2", timeout=30_000
    )
    duration = page.eval_on_selector("video.annotated", "v => v.duration")
    assert duration > 0.5, duration  # 30 frames at 30 fps
    # A row per track of the result, each with its bar.
    page.wait_for_selector("table.track-timeline tbody tr")
    shown = page.eval_on_selector_all(
        "table.track-timeline tbody tr", "rows => rows.map(r => Number(r.dataset.track))"
    )
    assert shown == [track["track_id"] for track in entry["tracks"]["tracks"]]
    assert page.locator("table.track-timeline .track-bar").count() == len(shown)
    # Frames a page at a time, each with what it found (not "nothing found").
    page.wait_for_selector("table.frames tbody tr[data-frame='0']")
    assert page.locator("table.frames tbody tr").count() == 20
    first = page.inner_text("table.frames tbody tr[data-frame='0']")
    assert "nothing found" not in first
    assert "track" in first
    page.click("text=Next frames")
    page.wait_for_selector("table.frames tbody tr[data-frame='20']")
    assert page.locator("table.frames tbody tr").count() == FRAMES - 20
    assert "nothing found" not in page.inner_text("table.detections tr[data-video]")
    # No thumbnail asked for the video's input: it has no image.
    assert not [url for url in network.requested if f"/v1/jobs/{job_id}/inputs/" in url]
    screenshot(page, "job-video")


def test_a_validation_shows_its_classes_scores_and_confusion_matrix(
    context: BrowserContext, real: Server, real_api: httpx.Client, real_jobs: dict[str, str]
) -> None:
    job_id = real_jobs["validation"]
    result = succeeded(real_api, job_id)
    page = signed_in(context, real)
    page.goto(f"{real.url}/#/jobs/{job_id}")
    page.wait_for_selector("table.per-class tbody tr")
    classes = page.eval_on_selector_all(
        "table.per-class tbody tr", "rows => rows.map(r => r.dataset.class)"
    )
    assert classes == [row["Class"] for row in result["per_class"]]
    headers = page.eval_on_selector_all(
        "table.per-class thead th", "ths => ths.map(t => t.textContent)"
    )
    assert headers[0] == "Class"
    for column in ("Images", "Instances", "Box-P", "Box-R", "mAP50", "mAP50-95"):
        assert column in headers
    page.wait_for_selector("#per-class-chart canvas")
    assert page.get_attribute("#per-class-chart", "data-points") == str(len(classes))
    # The curves from their points: a uPlot chart each, a series per class.
    page.wait_for_selector(".curve-chart canvas")
    drawn = page.eval_on_selector_all(
        ".curve-chart", "charts => charts.map(c => [c.dataset.curve, c.dataset.series])"
    )
    assert drawn == [[curve["name"], str(len(classes))] for curve in result["curves"]]
    assert "Precision-Recall(B)" in [name for name, _ in drawn]
    matrix = result["confusion_matrix"]
    assert page.locator("table.heatmap tbody tr").count() == len(matrix["names"])
    assert page.locator("table.heatmap tbody tr").first.locator("td").count() == len(
        matrix["names"]
    )
    screenshot(page, "job-validation")


def test_an_export_shows_its_variant_and_a_download_that_answers(
    context: BrowserContext, real: Server, real_api: httpx.Client, real_jobs: dict[str, str]
) -> None:
    job_id = real_jobs["export"]
    variant = succeeded(real_api, job_id)["variant"]
    page = signed_in(context, real)
    page.goto(f"{real.url}/#/jobs/{job_id}")
    selector = f"[data-variant='{variant['id']}']"
    page.wait_for_selector(selector)
    text = page.inner_text(selector)
    for shown in (variant["format"], variant["sha256"], "usable"):
        assert shown in text
    link = page.get_attribute(f"{selector} a.download", "href") or ""
    assert link.endswith(f"/v1/models/{variant['model_id']}/variants/{variant['id']}/file")
    response = real_api.get(link)
    assert response.status_code == 200
    assert hashlib.sha256(response.content).hexdigest() in variant["files"].values()
    with page.expect_download() as download:  # the page's own click, the token in a header
        page.click(f"{selector} a.download")
    assert download.value.suggested_filename.endswith(".torchscript")
    screenshot(page, "job-export")


def test_a_training_links_the_model_it_registered(
    context: BrowserContext, real: Server, real_api: httpx.Client, real_jobs: dict[str, str]
) -> None:
    job_id = real_jobs["training"]
    model = succeeded(real_api, job_id)["model"]
    page = signed_in(context, real)
    page.goto(f"{real.url}/#/jobs/{job_id}")
    page.wait_for_selector("#trained-model")
    assert page.inner_text("#trained-model") == model["name"]
    screenshot(page, "job-training-model")
    page.click("#trained-model")
    page.wait_for_url(f"**/#/models/{model['name']}")
    page.wait_for_selector(f"text={model['id']}")


def test_a_tune_lists_its_trials_marks_the_best_and_plots_a_param(
    context: BrowserContext, server: Server, api: httpx.Client
) -> None:
    job_id = submit(
        api,
        kind="tune",
        model="sim",
        params={
            "trials": 4,
            "epochs": 2,
            "warmup_trials": 1,
            "space": {
                "lr0": {"low": 0.001, "high": 0.1, "log": True},
                "batch": {"low": 8, "high": 32, "step": 8},
            },
            "base": {"sim_seconds": 0.4},
        },
    )
    result = succeeded(api, job_id)
    page = signed_in(context, server)
    page.goto(f"{server.url}/#/jobs/{job_id}")
    page.wait_for_selector("table.trials tbody tr")
    rows = page.eval_on_selector_all(
        "table.trials tbody tr", "rows => rows.map(r => Number(r.dataset.trial))"
    )
    assert rows == [trial["number"] for trial in result["trials"]]
    best = result["best"]
    assert best is not None
    assert page.eval_on_selector_all(
        "table.trials tr.best", "rows => rows.map(r => Number(r.dataset.trial))"
    ) == [best["number"]]
    page.wait_for_selector("#tune-scatter canvas")
    valued = [t for t in result["trials"] if t["value"] is not None]
    assert page.get_attribute("#tune-scatter", "data-param") == "lr0"
    assert page.get_attribute("#tune-scatter", "data-points") == str(len(valued))
    page.select_option("#tune-param", "batch")
    page.wait_for_selector("#tune-scatter[data-param=batch] canvas")
    # Its chain (the trials) is headed by the tune, and says so.
    page.wait_for_selector(".chain-summary")
    said = page.inner_text(".chain-summary")
    assert "This tune is the chain\N{RIGHT SINGLE QUOTATION MARK}s root" in said
    screenshot(page, "job-tune")


def test_an_unknown_playable_name_is_not_found(
    real_api: httpx.Client, real_jobs: dict[str, str]
) -> None:
    job_id = real_jobs["video"]
    succeeded(real_api, job_id)
    assert real_api.get(f"/v1/jobs/{job_id}/playable/00000_clip.frames.jsonl").status_code == 404
    assert real_api.get(f"/v1/jobs/{job_id}/playable/nothing.mp4").status_code == 404
    playable = real_api.get(f"/v1/jobs/{job_id}/playable/00000_clip.annotated.mp4")
    assert playable.status_code == 200
    assert playable.headers["content-type"] == "video/webm"
    assert playable.content[:4] == b"\x1a\x45\xdf\xa3"  # EBML: WebM
    names = [a["name"] for a in real_api.get(f"/v1/jobs/{job_id}/artifacts").json()["artifacts"]]
    assert not [name for name in names if name.endswith(".webm")]  # kept hidden
