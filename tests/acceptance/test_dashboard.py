"""The dashboard in a real browser, against a real `yolo-orch serve` on the simulated runtime
with tokens on (the harness: tests/dashboard_harness.py).

Playwright drives Debian's Chromium (`executable_path`: no browser download), as in
tests/acceptance/test_docs_page.py: every request that is not loopback is aborted and counted, and
the last test asserts none was made. Screenshots of every view at 1280 and 390 px go to
`test-artifacts/dashboard-*.png`; a view fails if its screenshot is one colour or its
expected elements are missing. Without Chromium the browser tests are skipped.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlsplit

import httpx
import numpy as np
import pytest
from httpx_sse import connect_sse
from playwright.sync_api import BrowserContext
from pycocotools import mask as coco_mask

from tests.dashboard_harness import (
    ADMIN_TOKEN,
    IMAGE_COLOUR,
    IMAGE_NAME,
    JOBS_TOKEN,
    Network,
    answering,
    api,
    browser,
    context,
    network,
    png,
    screenshot,
    server,
    signed_in,
    submit,
    wait_terminal,
)
from yolo_orch.testing import TERMINAL_STATES, Server

pytestmark = pytest.mark.acceptance
__all__ = ["api", "browser", "context", "network", "server"]  # the fixtures this module uses


def test_every_job_change_is_on_the_server_wide_stream(server: Server, api: httpx.Client) -> None:
    with connect_sse(api, "GET", "/v1/events") as source:
        events = source.iter_sse()
        assert next(events).event == "ready"
        job_id = submit(api, kind="inference", model="sim", inputs=["a.jpg"])
        seen = []
        for event in events:
            assert event.event == "job"
            job = event.json()
            if job["id"] == job_id:
                seen.append(job["state"])
                if job["state"] in TERMINAL_STATES:
                    break
    assert seen[0] in {"queued", "running"}
    assert seen[-1] == "succeeded"
    api.delete(f"/v1/jobs/{job_id}")


def test_a_last_event_id_this_server_did_not_send_is_a_resync(
    server: Server, api: httpx.Client
) -> None:
    for unknown in ("abc", "-1", "1e3", "99999999"):  # not an id, or not one of this log
        with connect_sse(api, "GET", "/v1/events", headers={"Last-Event-ID": unknown}) as source:
            assert next(source.iter_sse()).event == "resync", unknown


def test_the_overview_lists_the_lanes(context: BrowserContext, server: Server) -> None:
    page = signed_in(context, server)
    page.wait_for_selector("[data-lane='sim:0']")
    lanes = page.eval_on_selector_all("[data-lane]", "els => els.map(e => e.dataset.lane)")
    assert lanes == ["sim:0", "sim:1"]
    assert "free" in page.inner_text("[data-lane='sim:0']")
    assert page.is_visible("#no-telemetry")  # this host has no GPU
    assert page.is_visible("[data-tile=queue]")
    assert page.is_visible("[data-tile=refused]")
    assert page.locator("[data-tile=queued]").count() == 0  # one tile says it: the queue
    assert page.get_attribute("a:has([data-tile=queue])", "href") == "#/queue"
    screenshot(page, "overview")

    background = "() => getComputedStyle(document.body).backgroundColor"
    light = page.evaluate(background)
    page.emulate_media(color_scheme="dark")  # the page follows prefers-color-scheme
    assert page.evaluate(background) != light
    screenshot(page, "overview-dark")


def test_the_overview_draws_gpu_gauges_and_sparklines(
    context: BrowserContext, server: Server
) -> None:
    """This host has no GPU: the page is handed what a GPU host's API answers."""
    gib = 1 << 30
    lane = {
        "id": "cuda:0",
        "device_name": "NVIDIA H200",
        "slots": 1,
        "busy": 0,
        "jobs": [],
        "models": [],
        "healthy": True,
        "wedged": False,
        "memory_used_bytes": 30 * gib,
        "memory_total_bytes": 140 * gib,
        "utilization_percent": 64,
        "temperature_c": 58,
        "power_w": 412.5,
    }
    samples = [
        {
            **{k: lane[k] for k in list(lane)[-5:]},
            "at": 1_700_000_000 + 5 * i,
            "utilization_percent": 10 * (i % 10),
        }
        for i in range(40)
    ]
    answers = {
        "/v1/devices": {"runtime": "ultralytics", "devices": [lane]},
        "/v1/devices/history": {
            "enabled": True,
            "interval_s": 5.0,
            "devices": [{"id": "cuda:0", "samples": samples}],
        },
    }
    page = context.new_page()
    for path, body in answers.items():
        page.route(f"{server.url}{path}", answering(body))
    page.goto(f"{server.url}/")
    page.fill("#token-input", ADMIN_TOKEN)
    page.click("#token-form button[type=submit]")
    page.wait_for_selector("[data-lane='cuda:0'] .gauges")
    assert "NVIDIA H200" in page.inner_text("[data-lane='cuda:0']")
    gauges = page.eval_on_selector_all("[data-gauge]", "els => els.map(e => e.dataset.gauge)")
    assert gauges == ["memory", "utilization", "temperature", "power"]
    assert "64 %" in page.inner_text("[data-gauge=utilization]")
    assert page.get_attribute("[data-gauge=memory] meter", "value") == str(30 * gib)
    assert page.locator("canvas.sparkline").count() == 4
    assert "40 samples" in (
        page.get_attribute("[data-gauge=utilization] canvas", "aria-label") or ""
    )
    assert page.locator("#no-telemetry").count() == 0
    screenshot(page, "overview-gpu")


def test_a_submitted_job_moves_and_succeeds_on_the_page(
    context: BrowserContext, server: Server, api: httpx.Client
) -> None:
    page = signed_in(context, server)
    page.goto(f"{server.url}/#/jobs")
    page.wait_for_selector("table.jobs")
    job_id = submit(
        api,
        kind="inference",
        model="sim",
        inputs=["a.jpg"],
        params={"sim_seconds": 3, "sim_steps": 6},
    )
    row = f"tr[data-job='{job_id}']"
    page.wait_for_selector(row)  # from the stream: the page does not reload the list
    bar = f"{row} progress"
    page.wait_for_function(
        f'() => {{ const v = Number(document.querySelector("{bar}")?.dataset.value); '
        "return v > 0 && v < 1 }"
    )
    page.wait_for_selector(f"{row}[data-state=succeeded]")
    assert page.get_attribute(bar, "data-value") == "1.000"
    assert "succeeded" in page.inner_text(f"{row} .state")
    screenshot(page, "jobs")


def test_a_job_cancelled_from_the_page_ends_cancelled(
    context: BrowserContext, server: Server, api: httpx.Client
) -> None:
    page = signed_in(context, server)
    page.goto(f"{server.url}/#/jobs")
    job_id = submit(
        api,
        kind="inference",
        model="sim",
        inputs=["b.jpg"],
        params={"sim_seconds": 60, "sim_steps": 60},
    )
    row = f"tr[data-job='{job_id}']"
    page.wait_for_selector(f"{row}[data-state=running]")
    page.click(f"{row} button.cancel")
    page.wait_for_selector(f"{row}[data-state=cancelled]")
    assert api.get(f"/v1/jobs/{job_id}").json()["state"] == "cancelled"


def test_a_training_job_page_draws_its_curves(
    context: BrowserContext, server: Server, api: httpx.Client
) -> None:
    job_id = submit(api, kind="training", model="sim", params={"sim_seconds": 2, "sim_steps": 5})
    page = signed_in(context, server)
    page.goto(f"{server.url}/#/jobs/{job_id}")
    page.wait_for_selector("#loss-chart canvas")
    page.wait_for_selector("#loss-chart[data-points='5']")  # every epoch, as they came
    page.wait_for_selector(".job-head [data-state=succeeded]")
    for chart in ("#loss-chart", "#score-chart"):
        assert "epoch" in page.inner_text(chart)
    assert page.locator(".u-legend").count() == 2
    screenshot(page, "job-training")


def test_a_two_epoch_training_is_ticked_at_whole_epochs(
    context: BrowserContext, server: Server, api: httpx.Client
) -> None:
    """Issue 41: a 2-epoch chart was ticked at 1.1, 1.2, ..."""
    job_id = submit(api, kind="training", model="sim", params={"sim_seconds": 1, "sim_steps": 2})
    wait_terminal(api, job_id)
    page = signed_in(context, server)
    page.goto(f"{server.url}/#/jobs/{job_id}")
    page.wait_for_selector("#loss-chart[data-points='2']")
    page.wait_for_function(
        "() => document.getElementById('loss-chart').dataset.xTicks?.includes('2')"
    )
    ticks = page.get_attribute("#loss-chart", "data-x-ticks") or ""
    assert all(float(tick).is_integer() for tick in ticks.split(",")), ticks


def test_a_small_confidence_is_not_labelled_zero_percent(
    context: BrowserContext, server: Server
) -> None:
    """Issue 41: a label read "green 0%" for a confidence of 0.006."""
    page = signed_in(context, server)
    labels = page.evaluate(
        "async () => { const { percent } = await import('./ui/static/draw.js');"
        " return [0.006, 0.0004, 0, 0.25, 0.9996, 1].map(percent) }"
    )
    assert labels == ["0.6%", "<0.1%", "0%", "25%", "99.9%", "100%"]


def test_a_chain_steps_job_page_lists_the_chain_and_links_each_step(
    context: BrowserContext, server: Server, api: httpx.Client
) -> None:
    chain_id = submit(
        api,
        kind="training",
        model="sim",
        params={"sim_seconds": 0.2},
        then={"validate": {}, "export": {"formats": ["onnx"]}},
    )
    steps = api.get(f"/v1/chains/{chain_id}").json()["steps"]
    page = signed_in(context, server)
    page.goto(f"{server.url}/#/jobs/{steps[1]['id']}")  # the validation step
    page.wait_for_selector("tr.current")
    page.wait_for_function(
        "() => document.querySelectorAll('section table [data-state=succeeded]').length === 3"
    )
    table = page.inner_text("table")
    for kind in ("training", "validation", "export"):
        assert kind in table
    for step in steps:
        assert page.locator(f"a[href='#/jobs/{step['id']}']").count() == 1
    screenshot(page, "job-chain-step")


def test_an_inference_job_page_shows_thumbnails_with_boxes(
    context: BrowserContext, server: Server
) -> None:
    page = signed_in(context, server)
    page.goto(f"{server.url}/#/submit")
    page.wait_for_selector("#model option[value=sim]", state="attached")
    page.wait_for_selector("#drop")
    # Drop an image onto the page, as a person would drag one there.
    page.evaluate(
        """([name, bytes]) => {
            const transfer = new DataTransfer();
            transfer.items.add(new File([new Uint8Array(bytes)], name, { type: 'image/png' }));
            const drop = document.getElementById('drop');
            drop.dispatchEvent(new DragEvent('drop', { dataTransfer: transfer, bubbles: true }));
        }""",
        [IMAGE_NAME, list(png())],
    )
    assert IMAGE_NAME in page.inner_text("#chosen")
    page.fill("#extra", '{"sim_seconds": 0.5, "sim_steps": 2}')
    page.fill("#param-conf", "0.3")
    page.click("#submit-form button[type=submit]")
    page.wait_for_selector("#watch figure[data-drawn=image]")
    screenshot(page, "submit")

    page.click("#watch a[href^='#/jobs/']")
    figure = ".inference figure[data-drawn=image]"
    page.wait_for_selector(figure)
    assert int(page.get_attribute(f"{figure} canvas", "data-detections") or 0) > 0
    drawn = page.eval_on_selector(
        f"{figure} canvas",
        """(canvas, colour) => {
            const { width, height } = canvas;
            const { data } = canvas.getContext('2d').getImageData(0, 0, width, height);
            let other = 0;
            for (let i = 0; i < data.length; i += 4) {
                const far = Math.abs(data[i] - colour[0]) + Math.abs(data[i + 1] - colour[1])
                    + Math.abs(data[i + 2] - colour[2]);
                if (far > 60) other += 1;
            }
            return { other, total: data.length / 4 };
        }""",
        list(IMAGE_COLOUR),
    )
    assert 0 < drawn["other"] < drawn["total"], drawn  # the image, with boxes drawn over it
    assert page.locator("table.detections tbody tr").count() >= 2
    screenshot(page, "job-inference")
    page.click(f"{figure} button")
    page.wait_for_selector("#zoom[open] canvas")
    screenshot(page, "job-inference-enlarged")


def _one_value(param: dict[str, Any]) -> bool:
    """Whether a param's value is one number, true or false, or one of a list (not nested)."""
    options = [option for option in param.get("anyOf", [param]) if option.get("type") != "null"]
    return len(options) == 1 and (
        "enum" in options[0] or options[0].get("type") in {"integer", "number", "boolean"}
    )


def test_the_submit_form_and_the_filters_are_built_from_the_servers_meta(
    context: BrowserContext, server: Server, api: httpx.Client
) -> None:
    meta = api.get("/v1/meta").json()
    schema = next(kind["params"] for kind in meta["kinds"] if kind["kind"] == "inference")
    schema = schema["properties"]
    page = signed_in(context, server)
    page.goto(f"{server.url}/#/submit")
    page.wait_for_selector("#model option[value=sim]", state="attached")  # the runtime's model
    fields = page.eval_on_selector_all("#params [data-param]", "els => els.map((e) => e.name)")
    # A field for each param of one value (numbers, true or false, one of a list), in the
    # schema's order; lists and nested settings are left to the JSON field.
    nested = {name for name, param in schema.items() if not _one_value(param)}
    assert {"classes", "tracker", "capture", "slice"} <= nested
    assert fields == [name for name in schema if name not in nested]
    imgsz = schema["imgsz"]
    assert page.get_attribute("#param-imgsz", "placeholder") == str(imgsz["default"])
    assert page.get_attribute("#param-imgsz", "min") == str(imgsz["minimum"])
    assert page.get_attribute("#param-imgsz", "max") == str(imgsz["maximum"])
    assert page.get_attribute("#param-imgsz", "step") == "1"
    assert page.get_attribute("#param-conf", "step") == "any"
    assert schema["conf"]["description"] in (
        page.get_attribute("label[for=param-conf]", "title") or ""
    )
    options = page.eval_on_selector_all("#param-format option", "els => els.map((e) => e.value)")
    assert options == ["", *schema["format"]["enum"]]
    assert (
        page.inner_text("#param-format option[value='']")
        == f"default ({schema['format']['default']})"
    )
    assert page.get_attribute("#param-half", "type") == "checkbox"
    assert not page.is_checked("#param-half")  # its default, false

    page.set_input_files(
        "#images", files=[{"name": IMAGE_NAME, "mimeType": "image/png", "buffer": png()}]
    )
    page.fill("#param-imgsz", str(imgsz["maximum"] + 32))  # past the server's bound
    page.click("#submit-form button[type=submit]")
    assert page.eval_on_selector("#param-imgsz", "e => e.validity.rangeOverflow")
    assert page.locator("#watch a").count() == 0  # the browser kept it from being sent

    page.fill("#param-imgsz", "320")
    page.select_option("#param-format", "pt")
    page.check("#param-half")
    page.fill("#extra", '{"sim_seconds": 0.2, "sim_steps": 1}')
    with page.expect_request("**/v1/jobs/inference") as sent:
        page.click("#submit-form button[type=submit]")
    body = sent.value.post_data_buffer or b""
    params = json.loads(re.search(rb'name="params"\r\n\r\n(.*?)\r\n--', body, re.S).group(1))
    # Only what was given: the fields left empty send nothing, and the server's defaults hold.
    assert params == {
        "sim_seconds": 0.2,
        "sim_steps": 1,
        "imgsz": 320,
        "format": "pt",
        "half": True,
    }
    page.wait_for_selector("#watch [data-state=succeeded]")

    page.goto(f"{server.url}/#/jobs")
    page.wait_for_selector("#filter-kind")
    values = "els => els.map((e) => e.value)"
    assert page.eval_on_selector_all("#filter-state option", values) == ["", *meta["states"]]
    kinds = [kind["kind"] for kind in meta["kinds"]]
    assert page.eval_on_selector_all("#filter-kind option", values) == ["", *kinds]


def test_masks_sent_as_rle_decode_as_pycocotools_encoded_them(
    context: BrowserContext, server: Server
) -> None:
    mask = (np.random.default_rng(7).random((37, 53)) > 0.6).astype(np.uint8)
    mask[5:20, 10:40] = 1  # long runs too, whose lengths take several characters
    rle = coco_mask.encode(np.asfortranarray(mask))
    page = context.new_page()
    page.goto(f"{server.url}/")
    decoded = page.evaluate(
        """async ([counts, total]) => {
            const { decodeRle } = await import('/ui/static/draw.js');
            return Array.from(decodeRle(counts, total));
        }""",
        [rle["counts"].decode(), mask.size],
    )
    assert decoded == mask.flatten(order="F").tolist()  # RLE runs down the columns


def test_the_models_view_and_its_import_form(context: BrowserContext, server: Server) -> None:
    page = signed_in(context, server)
    page.goto(f"{server.url}/#/models")
    page.wait_for_selector("table.models tbody tr")
    assert "No models imported yet" in page.inner_text("table.models")
    assert page.is_visible("label[for=model-file]")
    screenshot(page, "models")


def test_the_token_flow(context: BrowserContext, server: Server, api: httpx.Client) -> None:
    page = context.new_page()
    page.goto(f"{server.url}/")
    page.wait_for_selector("#status:not([hidden])")
    assert "401" in page.inner_text("#status")
    assert "token is required" in page.inner_text("#status")
    assert page.locator("[data-lane]").count() == 0

    page.fill("#token-input", "not-a-token")
    page.click("#token-form button[type=submit]")
    page.wait_for_function(
        "() => document.getElementById('status').innerText.includes('token is not valid')"
    )
    assert "401" in page.inner_text("#status")

    page.fill("#token-input", JOBS_TOKEN)
    page.click("#token-form button[type=submit]")
    page.wait_for_selector("[data-lane='sim:0']")
    assert page.is_hidden("#status")
    page.reload()  # the token stays for the session
    page.wait_for_selector("[data-lane='sim:0']")
    assert page.input_value("#token-input") == JOBS_TOKEN

    # A jobs token may not delete: the page says so.
    job_id = submit(api, kind="inference", model="sim", inputs=["c.jpg"])
    wait_terminal(api, job_id)
    page.goto(f"{server.url}/#/jobs/{job_id}")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click(".job-head button.delete")
    page.wait_for_function("() => document.getElementById('status').innerText.includes('403')")
    assert api.get(f"/v1/jobs/{job_id}").status_code == 200

    page.click("#token-clear")
    page.wait_for_function(
        "() => document.getElementById('status').innerText.includes('token is required')"
    )
    assert page.evaluate("() => sessionStorage.length") == 0


def test_no_request_left_loopback(
    context: BrowserContext, server: Server, network: Network
) -> None:
    origin = urlsplit(server.url).netloc
    assert sum(urlsplit(url).netloc == origin for url in network.requested) > 20
    assert network.aborted == [], f"the dashboard asked other hosts: {network.aborted}"
    # The count counts: a request elsewhere is aborted and recorded.
    page = context.new_page()
    with pytest.raises(Exception, match="ERR_INTERNET_DISCONNECTED"):
        page.goto("http://example.invalid/")
    assert network.aborted == ["http://example.invalid/"]
