"""The dashboard's jobs list in a real browser, against its own `yolo-orch serve` (simulated
runtime, tokens on; the harness: tests/dashboard_harness.py): an order by creation that live
updates never change, the columns, and the search by id prefix and by model."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import BrowserContext, Page

from tests.dashboard_harness import (
    api,
    browser,
    context,
    network,
    screenshot,
    server,
    signed_in,
    submit,
    wait_terminal,
)
from yolo_orch.testing import Server

pytestmark = pytest.mark.acceptance
__all__ = ["api", "browser", "context", "network", "server"]  # the fixtures this module uses


@pytest.fixture
def holder(api: httpx.Client) -> Iterator[str]:
    """A long job that others wait for (`after`): they stay queued, whatever the lanes do."""
    job_id = submit(
        api,
        kind="inference",
        model="sim",
        inputs=["hold.jpg"],
        params={"sim_seconds": 120, "sim_steps": 240},
    )
    yield job_id
    api.post(f"/v1/jobs/{job_id}/cancel")


def only_state(page: Page, state: str) -> None:
    """Until the list filtered on `state` came (the unfiltered one may come first)."""
    page.select_option("#filter-state", state)
    page.wait_for_function(
        "state => { const rows = [...document.querySelectorAll('tr[data-job]')];"
        " return rows.length && rows.every(r => r.dataset.state === state) }",
        arg=state,
    )


def listed(page: Page) -> list[str]:
    ids: list[str] = page.eval_on_selector_all(
        "tr[data-job]", "rows => rows.map(r => r.dataset.job)"
    )
    return ids


def test_a_cancel_does_not_move_a_job_above_newer_ones(
    context: BrowserContext, server: Server, api: httpx.Client, holder: str
) -> None:
    """The reported bug: filtered on `cancelled`, a job cancelled after a newer one was put on
    top (a job created at 2:20:29 above one created at 2:22:24), since the page took every
    job the stream brought that it did not list for a new one."""
    older = submit(api, kind="inference", model="sim", inputs=["o.jpg"], after=[holder])
    newer = submit(api, kind="inference", model="sim", inputs=["n.jpg"], after=[holder])
    api.post(f"/v1/jobs/{newer}/cancel")
    page = signed_in(context, server)
    page.goto(f"{server.url}/#/jobs")
    only_state(page, "cancelled")
    page.wait_for_selector(f"tr[data-job='{newer}']")
    assert older not in listed(page)

    api.post(f"/v1/jobs/{older}/cancel")
    page.wait_for_selector(f"tr[data-job='{older}'][data-state=cancelled]")
    ids = listed(page)
    assert ids.index(newer) < ids.index(older), "newest first, by creation"
    page.reload()  # what the server says is the order the page kept
    page.wait_for_selector("#live[data-state=live]")
    only_state(page, "cancelled")
    page.wait_for_selector(f"tr[data-job='{older}']")
    assert listed(page) == ids


def test_a_job_on_an_older_page_does_not_come_to_the_top_when_it_changes(
    context: BrowserContext, server: Server, api: httpx.Client, holder: str
) -> None:
    waiting = submit(api, kind="inference", model="sim", inputs=["w.jpg"], after=[holder])
    for n in range(21):  # a page is 20 rows: `waiting` is on the second
        wait_terminal(api, submit(api, kind="inference", model="sim", inputs=[f"{n}.jpg"]))
    page = signed_in(context, server)
    page.goto(f"{server.url}/#/jobs")
    page.wait_for_selector("#older:not([hidden])")
    first_page = listed(page)
    assert waiting not in first_page
    api.post(f"/v1/jobs/{waiting}/cancel")
    newest = submit(api, kind="inference", model="sim", inputs=["new.jpg"])
    page.wait_for_selector(f"tr[data-job='{newest}']")  # the stream got that far
    assert waiting not in listed(page)
    assert listed(page)[1:] == first_page
    page.click("#older")
    page.wait_for_selector(f"tr[data-job='{waiting}'][data-state=cancelled]")


def test_the_list_shows_duration_dataset_error_and_searches_by_id_and_model(
    context: BrowserContext, server: Server, api: httpx.Client
) -> None:
    failed = submit(
        api, kind="inference", model="sim", inputs=["f.jpg"], params={"sim_fail": "error"}
    )
    trained = submit(
        api,
        kind="training",
        model="sim",
        dataset="data.yaml",
        params={"epochs": 2, "sim_seconds": 1},
    )
    assert wait_terminal(api, failed)["state"] == "failed"
    assert wait_terminal(api, trained)["state"] == "succeeded"
    page = signed_in(context, server)
    page.goto(f"{server.url}/#/jobs")
    row = f"tr[data-job='{trained}']"
    page.wait_for_selector(row)
    assert page.inner_text(f"{row} .dataset") == "data.yaml"
    assert page.inner_text(f"{row} .duration").endswith(" s")
    code = api.get(f"/v1/jobs/{failed}").json()["error"]["code"]
    assert page.inner_text(f"tr[data-job='{failed}'] .error-code") == code
    message = page.get_attribute(f"tr[data-job='{failed}'] .error-code span", "title")
    assert message
    assert "simulated failure" in message
    screenshot(page, "jobs-columns")

    page.fill("#filter-id", trained[:8])
    page.wait_for_function(
        "id => [...document.querySelectorAll('tr[data-job]')].every(r => r.dataset.job === id)",
        arg=trained,
    )
    assert listed(page) == [trained]
    screenshot(page, "jobs-search")

    page.fill("#filter-id", "")
    page.fill("#filter-model", "not-a-model")
    page.wait_for_selector("tr.none")
    assert listed(page) == []
    page.fill("#filter-model", "sim")
    page.wait_for_selector(row)
    shown = listed(page)
    assert trained in shown
    assert failed in shown
    # A job the stream brings is filtered as the server filters.
    live = submit(api, kind="inference", model="sim", inputs=["live.jpg"])
    page.wait_for_selector(f"tr[data-job='{live}']")
    assert listed(page)[0] == live
