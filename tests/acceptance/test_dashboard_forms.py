"""The submit page's forms, built from the server's own schemas, and the file picker over the data
roots (GET /v1/data-files), in Chromium against a real `yolo-orch serve` (simulated runtime, one
data root; the harness: tests/dashboard_harness.py): a training, a validation and an export job
each submitted from its generated form land on their pages; a value the server refuses shows its
detail beside the field; the picker lists the root and picks a dataset's yaml; the fields' bounds
are the schema's."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import BrowserContext, Page

from tests.dashboard_harness import (
    ADMIN_TOKEN,
    JOBS_TOKEN,
    api,
    browser,
    context,
    network,
    screenshot,
    signed_in,
    wait_terminal,
)
from yolo_orch.testing import Server

pytestmark = pytest.mark.acceptance
__all__ = ["api", "browser", "context", "network"]  # the fixtures this module uses

QUICK = {"sim_seconds": "0.1", "sim_steps": "1"}


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("forms") / "images"
    (root / "shapes" / "images" / "train").mkdir(parents=True)
    (root / "shapes" / "images" / "val").mkdir(parents=True)
    (root / "shapes" / "data.yaml").write_text(
        "path: .\ntrain: images/train\nval: images/val\nnames: [circle, square]\n"
    )
    (root / "street.jpg").write_bytes(b"not really a jpeg")
    outside = root.parent / "outside"
    outside.mkdir()
    (outside / "secret.yaml").write_text("names: [x]\n")
    (root / "leak").symlink_to(outside)
    return root


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, data_root: Path) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("forms-server")
    tokens = [
        {"sha256": hashlib.sha256(ADMIN_TOKEN.encode()).hexdigest(), "scope": "admin"},
        {"sha256": hashlib.sha256(JOBS_TOKEN.encode()).hexdigest(), "scope": "jobs"},
    ]
    server = Server(
        tmp / "data",
        tmp / "logs",
        "dashboard-forms",
        tokens=json.dumps(tokens),
        data_roots=[str(data_root)],
    )
    try:
        server.start()
        yield server
    finally:
        server.cleanup()


def params_of(api: httpx.Client, kind: str) -> dict[str, Any]:
    meta = api.get("/v1/meta").json()
    params: dict[str, Any] = next(k["params"] for k in meta["kinds"] if k["kind"] == kind)
    return params


def open_form(page: Page, server: Server, kind: str, field: str) -> None:
    page.goto(f"{server.url}/#/submit?kind={kind}&model=sim")
    page.wait_for_selector(f"#{field}")
    assert page.input_value("#kind") == kind
    assert page.input_value("#model") == "sim"


def fill_quick(page: Page) -> None:
    for name, value in QUICK.items():
        page.fill(f"#param-{name}", value)


def submitted(page: Page, api: httpx.Client) -> dict[str, Any]:
    """Clicks submit; the page opens the new job's: the job as the API has it."""
    with page.expect_response("**/v1/jobs") as answer:
        page.click("#submit-form button[type=submit]")
    assert answer.value.status == 202, answer.value.text()
    page.wait_for_function("() => /^#\\/jobs\\/[\\w-]+$/.test(window.location.hash)")
    job_id = page.url.rsplit("/", 1)[1]
    page.wait_for_selector("#view[data-view=jobs]")
    job: dict[str, Any] = api.get(f"/v1/jobs/{job_id}").json()
    return job


def test_training_validation_and_export_forms_submit_jobs_that_open_their_pages(
    context: BrowserContext, server: Server, api: httpx.Client
) -> None:
    page = signed_in(context, server)

    open_form(page, server, "training", "param-epochs")
    page.fill("#param-epochs", "2")
    page.fill("#job-dataset", "shapes/data.yaml")
    fill_quick(page)
    screenshot(page, "submit-training")
    training = submitted(page, api)
    assert (training["kind"], training["model"]) == ("training", "sim")
    assert training["params"]["epochs"] == 2
    assert training["dataset"] == "shapes/data.yaml"

    open_form(page, server, "validation", "job-split")
    page.select_option("#job-split", "test")
    page.fill("#param-conf", "0.2")
    fill_quick(page)
    screenshot(page, "submit-validation")
    validation = submitted(page, api)
    assert validation["kind"] == "validation"
    assert validation["params"]["conf"] == 0.2
    assert validation["split"] == "test"

    open_form(page, server, "export", "param-format")
    options = page.eval_on_selector_all("#param-format option", "els => els.map((e) => e.value)")
    schema = params_of(api, "export")
    formats = schema["$defs"][schema["properties"]["format"]["$ref"].rsplit("/", 1)[1]]["enum"]
    assert options == ["", *formats]
    page.select_option("#param-format", "onnx")
    fill_quick(page)
    screenshot(page, "submit-export")
    export = submitted(page, api)
    assert export["kind"] == "export"
    assert export["params"]["format"] == "onnx"

    for job in (training, validation, export):
        assert wait_terminal(api, job["id"])["state"] in {"succeeded", "failed"}


def test_a_value_the_server_refuses_shows_its_detail_beside_the_field(
    context: BrowserContext, server: Server, api: httpx.Client
) -> None:
    page = signed_in(context, server)
    open_form(page, server, "training", "param-epochs")
    before = api.get("/v1/jobs").json()
    # The browser keeps a value past a field's bounds; the JSON field does not: the server says.
    page.fill("#extra", '{"epochs": 0}')
    fill_quick(page)
    with page.expect_response("**/v1/jobs") as answer:
        page.click("#submit-form button[type=submit]")
    assert answer.value.status == 422
    error = page.wait_for_selector(".field-error[data-error-for=param-epochs]")
    problem = answer.value.json()
    assert problem["errors"][0]["msg"] in (error.inner_text() or "")
    assert page.get_attribute("#param-epochs", "aria-invalid") == "true"
    assert "#/submit" in page.url  # still on the form
    screenshot(page, "submit-refused")
    assert api.get("/v1/jobs").json() == before


def test_the_file_picker_lists_the_data_root_and_picks_a_datasets_yaml(
    context: BrowserContext, server: Server
) -> None:
    page = signed_in(context, server)
    open_form(page, server, "training", "job-dataset")
    page.click("#job-dataset-browse")
    listing = "#job-dataset-picker-list"
    page.wait_for_selector(f"{listing} li[data-name=shapes]")
    names = page.eval_on_selector_all(f"{listing} li", "els => els.map((e) => e.dataset.name)")
    assert names == ["shapes", "street.jpg"]  # the symlink leading out is not listed
    page.click(f"{listing} li[data-name=shapes] button")
    page.wait_for_selector(f"{listing} li[data-name='data.yaml']")
    assert page.inner_text("#job-dataset-picker-path") == "/shapes"
    screenshot(page, "submit-picker")
    page.click(f"{listing} li[data-name='data.yaml'] button")
    assert page.input_value("#job-dataset") == "shapes/data.yaml"
    assert page.locator("#job-dataset-picker").count() == 0  # closed once picked


def test_a_forms_bounds_are_the_schemas(
    context: BrowserContext, server: Server, api: httpx.Client
) -> None:
    page = signed_in(context, server)
    open_form(page, server, "training", "param-epochs")
    schema = params_of(api, "training")["properties"]
    checked = 0
    for name, param in schema.items():
        value = next((o for o in param.get("anyOf", [param]) if o.get("type") != "null"), {})
        if value.get("type") not in {"integer", "number"}:
            continue
        low = value.get("minimum", value.get("exclusiveMinimum"))
        high = value.get("maximum", value.get("exclusiveMaximum"))
        bounds = page.eval_on_selector(f"#param-{name}", "e => [e.min, e.max]")
        assert bounds == [str(low), str(high)], name
        checked += 1
    assert checked >= 5
    assert page.get_attribute("#param-epochs", "placeholder") == str(schema["epochs"]["default"])
    # the request's own fields come from the API's description: gpus' bounds too
    document = api.get("/openapi.json").json()
    gpus = document["components"]["schemas"]["TrainingJobCreate"]["properties"]["gpus"]
    assert page.eval_on_selector("#job-gpus", "e => [Number(e.min), Number(e.max)]") == [
        gpus["minimum"],
        gpus["maximum"],
    ]


def test_an_inference_on_files_picked_under_the_data_root_opens_its_page(
    context: BrowserContext, server: Server, api: httpx.Client
) -> None:
    page = signed_in(context, server)
    open_form(page, server, "inference", "job-inputs")
    page.wait_for_selector("#drop")  # the uploads stay: without any, the inputs named are run
    page.click("#job-inputs-browse")
    page.click("#job-inputs-picker-list li[data-name='street.jpg'] button")
    assert page.input_value("#job-inputs") == "street.jpg"
    fill_quick(page)
    job = submitted(page, api)
    assert (job["kind"], job["inputs"]) == ("inference", ["street.jpg"])
