"""The dashboard's models pages and chain tree in a real browser (issue 41, items 4 and 6), against
a real `yolo-orch serve` on the simulated runtime with tokens on (tests/dashboard_harness.py).

Two real checkpoints (untrained yolo11n, built in a second) are imported once per module; the
simulated runtime runs inference jobs on them. A model page shows its aliases with their
history, moves them (promote, rollback) and deletes the model; a token without `models:write`
sees the server's 403 and nothing moves. The simulated model registers no model, so its chains
cannot promote: the chain test makes a real chain (training, validation, export) and a real
promotion (gated on that chain's validation, its figures the server's), and the page is shown the
chain with that promotion as its last step. Screenshots: `test-artifacts/dashboard-models-*.png`,
`test-artifacts/dashboard-chain-*.png`.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import BrowserContext, Page

from tests.dashboard_harness import (
    JOBS_TOKEN,
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
from yolo_orch.testing import Server

pytestmark = pytest.mark.acceptance
__all__ = ["api", "browser", "context", "network", "server"]  # the fixtures this module uses

NAME = "detector"
ALIAS = f"{NAME}@production"
ALIAS_PATH = f"/v1/models/{NAME}/aliases/production"


@dataclass(frozen=True)
class Models:
    v1: dict[str, Any]
    v2: dict[str, Any]
    weights: Path


@pytest.fixture(scope="module")
def models(api: httpx.Client, tmp_path_factory: pytest.TempPathFactory) -> Models:
    """detector-v1 and detector-v2 imported, and detector@production moved twice (v1, then v2)."""
    from yolo_orch.testing.yolo import build_checkpoint, ensure_ultralytics

    tmp = tmp_path_factory.mktemp("dashboard-models")
    # The server loads torch and ultralytics at its first import: a file it refuses makes it load
    # them while this process builds the checkpoints (both take seconds).
    with ThreadPoolExecutor(1) as pool:
        warm = pool.submit(
            api.post, "/v1/models", files={"file": ("warm.pt", b"not a checkpoint")}, timeout=60
        )
        ensure_ultralytics(tmp)
        checkpoints = [
            (version, build_checkpoint(tmp / f"{version}.pt", classes))
            for version, classes in (("v1", ("person", "car")), ("v2", ("person", "car", "dog")))
        ]
        assert warm.result().status_code == 422
    imported = [import_model(api, weights, f"{NAME}-{version}") for version, weights in checkpoints]
    v1, v2 = imported
    move(api, v1["id"], "the first detector")
    move(api, v2["id"], "more classes")
    return Models(v1, v2, tmp)


def import_model(api: httpx.Client, weights: Path, name: str) -> dict[str, Any]:
    response = api.post(
        "/v1/models",
        files={"file": (weights.name, weights.read_bytes())},
        data={"name": name},
        timeout=60,
    )
    assert response.status_code == 201, response.text
    model: dict[str, Any] = response.json()
    return model


def move(api: httpx.Client, model: str, reason: str) -> None:
    response = api.put(ALIAS_PATH, json={"model": model, "reason": reason})
    assert response.status_code == 200, response.text


def alias_target(api: httpx.Client) -> str:
    target: str = api.get(ALIAS_PATH).json()["model_id"]
    return target


def history(api: httpx.Client) -> list[dict[str, Any]]:
    moves: list[dict[str, Any]] = api.get(f"{ALIAS_PATH}/history").json()["moves"]
    return moves


def model_page(context: BrowserContext, server: Server, ref: str, token: str | None = None) -> Page:
    page = signed_in(context, server) if token is None else signed_in(context, server, token)
    page.goto(f"{server.url}/#/models/{ref}")
    page.wait_for_selector(f"article[data-alias='{ALIAS}'] table.alias-history tbody tr")
    return page


def test_a_model_page_shows_its_aliases_with_their_history(
    context: BrowserContext, server: Server, api: httpx.Client, models: Models
) -> None:
    page = model_page(context, server, str(models.v2["name"]))
    card = page.locator(f"article[data-alias='{ALIAS}']")
    # Where it points, this model; then every move, newest first: who, from, to, why.
    assert card.locator(f"h3 a[data-model-id='{models.v2['id']}']").count() == 1
    assert "this model" in card.locator("h3").inner_text()
    rows = card.locator("table.alias-history tbody tr")
    assert rows.count() == 2
    moves = history(api)
    for row, moved in zip(rows.all(), moves, strict=True):
        assert row.locator(".who").inner_text() == moved["actor"]
        assert row.locator(".why").inner_text() == moved["reason"]
        assert row.locator(f".to a[data-model-id='{moved['to_model_id']}']").count() == 1
    assert rows.nth(0).locator(f".from a[data-model-id='{models.v1['id']}']").count() == 1
    assert rows.nth(1).locator(".from").inner_text() == "made"
    assert "more classes" in rows.nth(0).inner_text()
    # The facts, and a "use" link to the submit page with the model chosen.
    assert models.v2["id"] in page.inner_text(".model-page dl")
    assert page.get_attribute("a.use", "href") == f"#/submit?model={models.v2['name']}"
    screenshot(page, "models-aliases")

    # The registry lists the alias, and names link to their pages.
    page.goto(f"{server.url}/#/models")
    page.wait_for_selector(f"table.alias-list tr[data-alias='{ALIAS}']")
    assert models.v2["name"] in page.inner_text(f"tr[data-alias='{ALIAS}']")
    page.click(f"a.model-link[href='#/models/{models.v1['name']}']")
    page.wait_for_selector(f"[data-model-name='{models.v1['name']}']")
    screenshot(page, "models-page")


def test_promote_and_rollback_from_the_page_move_the_alias(
    context: BrowserContext, server: Server, api: httpx.Client, models: Models
) -> None:
    assert alias_target(api) == models.v2["id"]
    page = model_page(context, server, str(models.v1["name"]))
    card = page.locator(f"article[data-alias='{ALIAS}']")
    # This page's model is the one offered first.
    assert card.locator("select.promote-model").input_value() == models.v1["id"]
    card.locator("input.promote-reason").fill("back to two classes")
    card.locator("form.promote button[type=submit]").click()
    page.wait_for_function(
        "() => document.getElementById('status').innerText.includes('now points to')"
    )
    assert alias_target(api) == models.v1["id"]
    latest = history(api)[0]
    assert (latest["from_model_id"], latest["to_model_id"]) == (models.v2["id"], models.v1["id"])
    assert latest["reason"] == "back to two classes"
    # The page is drawn again: the alias points here now, three moves.
    page.wait_for_selector(
        f"article[data-alias='{ALIAS}'] table.alias-history tbody tr:nth-child(3)"
    )
    assert "this model" in card.locator("h3").inner_text()

    page.once("dialog", lambda dialog: dialog.accept())
    card.locator("button.rollback").click()
    page.wait_for_function(
        "() => document.getElementById('status').innerText.includes('rolled back to')"
    )
    assert alias_target(api) == models.v2["id"]
    assert len(history(api)) == 4
    page.wait_for_selector(
        f"article[data-alias='{ALIAS}'] table.alias-history tbody tr:nth-child(4)"
    )


def test_a_token_without_models_write_sees_the_refusal_and_nothing_moves(
    context: BrowserContext, server: Server, api: httpx.Client, models: Models
) -> None:
    before, moves = alias_target(api), len(history(api))
    page = model_page(context, server, str(models.v1["name"]), token=JOBS_TOKEN)
    card = page.locator(f"article[data-alias='{ALIAS}']")
    card.locator("form.promote button[type=submit]").click()
    page.wait_for_function("() => document.getElementById('status').innerText.includes('403')")
    assert "models:write" in page.inner_text("#status")
    page.evaluate("() => { document.getElementById('status').hidden = true }")

    page.once("dialog", lambda dialog: dialog.accept())
    card.locator("button.rollback").click()
    page.wait_for_function(
        "() => !document.getElementById('status').hidden"
        " && document.getElementById('status').innerText.includes('403')"
    )
    page.evaluate("() => { document.getElementById('status').hidden = true }")

    page.on("dialog", lambda dialog: dialog.accept())
    page.click("button.delete")
    page.wait_for_function(
        "() => !document.getElementById('status').hidden"
        " && document.getElementById('status').innerText.includes('403')"
    )
    screenshot(page, "models-refused")
    assert (alias_target(api), len(history(api))) == (before, moves)
    assert api.get(f"/v1/models/{models.v1['id']}").status_code == 200


def test_the_model_page_lists_the_jobs_that_used_it(
    context: BrowserContext, server: Server, api: httpx.Client, models: Models
) -> None:
    by_name = upload_inference(api, str(models.v2["name"]))
    by_alias = upload_inference(api, ALIAS)  # detector@production points to v2
    other = upload_inference(api, str(models.v1["name"]))
    for job_id in (by_name, by_alias, other):
        assert wait_terminal(api, job_id)["state"] == "succeeded"
    page = model_page(context, server, str(models.v2["name"]))
    used = page.locator("table.used-by")
    used.locator(f"tr[data-job='{by_alias}']").wait_for()
    assert used.locator(f"tr[data-job='{by_name}']").count() == 1
    assert used.locator(f"tr[data-job='{other}']").count() == 0
    assert ALIAS in used.locator(f"tr[data-job='{by_alias}']").inner_text()
    # An imported model was made by no job.
    assert "no job made it" in page.inner_text(".model-page")
    page.click(f"table.used-by a[href='#/jobs/{by_name}']")
    page.wait_for_selector(".job-head [data-state=succeeded]")


def test_the_model_page_links_the_training_that_made_it(
    context: BrowserContext, server: Server, api: httpx.Client, models: Models
) -> None:
    """A trained model's `source` is `training:<job id>`; the simulated training registers no
    model, so the page is shown v1 as a training made it (its chain steps name it `job:<id>`)."""
    training = submit(api, kind="training", model="sim", params={"sim_seconds": 0.05})
    wait_terminal(api, training)
    detail = api.get(f"/v1/models/{models.v1['name']}").json()
    page = signed_in(context, server)
    page.route(
        f"**/v1/models/{models.v1['name']}",
        answering({**detail, "source": f"training:{training}"}),
    )
    page.goto(f"{server.url}/#/models/{models.v1['name']}")
    made_by = page.locator(f".made-by-jobs a[href='#/jobs/{training}']")
    made_by.wait_for()
    assert "training" in page.inner_text(".made-by-jobs")
    assert page.locator(f"dd a.made-by[href='#/jobs/{training}']").count() == 1


def upload_inference(api: httpx.Client, model: str) -> str:
    response = api.post(
        "/v1/jobs/inference",
        data={"model": model},
        files=[("images", ("street.png", png(), "image/png"))],
    )
    assert response.status_code == 202, response.text
    job_id: str = response.json()["id"]
    return job_id


def test_deleting_a_model_from_its_page_removes_it(
    context: BrowserContext, server: Server, api: httpx.Client, models: Models
) -> None:
    from yolo_orch.testing.yolo import build_checkpoint

    weights = build_checkpoint(models.weights / "spare.pt", ("cat", "dog"))
    spare = import_model(api, weights, "spare-detector")
    page = signed_in(context, server)
    page.goto(f"{server.url}/#/models/{spare['name']}")
    page.wait_for_selector("button.delete")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("button.delete")
    page.wait_for_function("() => window.location.hash === '#/models'")
    page.wait_for_selector("table.models tbody tr")
    assert api.get(f"/v1/models/{spare['id']}").status_code == 404
    assert page.locator(f"tr[data-model='{spare['id']}']").count() == 0
    assert "deleted model spare-detector" in page.inner_text("#status")


def test_a_chains_tree_shows_each_step_and_the_gates_figures(
    context: BrowserContext, server: Server, api: httpx.Client, models: Models
) -> None:
    chain_id = submit(
        api,
        kind="training",
        model="sim",
        params={"sim_seconds": 0.2},
        then={"validate": {}, "export": {"formats": ["onnx"]}},
    )
    steps = api.get(f"/v1/chains/{chain_id}").json()["steps"]
    for step in steps:
        wait_terminal(api, step["id"])
    chain = api.get(f"/v1/chains/{chain_id}").json()
    validation = chain["steps"][1]
    # A promotion gated on the chain's validation (the alias does not exist yet: the baseline is
    # scored on the same validation, as the chain would score the alias's current model).
    promote_id = submit(
        api,
        kind="promote",
        model=models.v1["name"],
        alias=f"{NAME}@staging",
        candidate=validation["id"],
        baseline=validation["id"],
        params={"gate": {"metric": "mAP50", "min": 0.1, "not_worse": True}},
    )
    promotion = wait_terminal(api, promote_id)
    result = promotion["result"]
    assert result["promoted"] is True, result
    shown = {
        **chain,
        "promoted": True,
        "steps": [*chain["steps"], {**promotion, "chain_id": chain_id, "parent_id": chain_id}],
    }

    page = signed_in(context, server)
    page.route(f"**/v1/chains/{chain_id}", answering(shown))
    page.goto(f"{server.url}/#/jobs/{validation['id']}")
    page.wait_for_selector("table.gate")
    tree = page.locator("table.chain-tree tbody tr")
    assert [row.get_attribute("data-kind") for row in tree.all()] == [
        "training",
        "validation",
        "export",
        "promote",
    ]
    assert [row.get_attribute("data-depth") for row in tree.all()] == ["0", "1", "2", "3"]
    assert tree.nth(1).get_attribute("class") == "current"
    assert tree.locator("[data-state=succeeded]").count() == 4
    # The root's link is the chain's page.
    back = page.locator(f"table.chain-tree a[href='#/jobs/{chain_id}']")
    assert "(the chain)" in (back.get_attribute("aria-label") or "")
    gate = result["gate"]
    figures = {
        name: page.inner_text(f"table.gate td[data-figure='{name}']")
        for name in ("metric", "candidate", "baseline", "min", "better", "passed", "promoted")
    }
    assert figures == {
        "metric": "mAP50",
        "candidate": str(gate["candidate"]),
        "baseline": str(gate["baseline"]),
        "min": "0.1",
        "better": "higher",
        "passed": "✓ passed",
        "promoted": "true",
    }
    assert "promoted" in page.inner_text(".promotion")
    assert "null" not in page.inner_text(".chain")
    assert page.get_attribute(".promotion", "data-promoted") == "true"
    screenshot(page, "chain")

    # A chain with the alias's current model scored too (`not_worse`): that validation is a stage
    # of its own, after the exports, before the promotion.
    kinds = [("training", "sim", None), ("validation", "job:t", "t"), ("export", "job:t", "t")]
    kinds += [("export", "job:t", "t"), ("validation", ALIAS, "t"), ("promote", "job:t", "t")]
    steps = [
        {
            "id": "t" if parent is None else f"s{i}",
            "kind": kind,
            "model": model,
            "parent_id": parent,
        }
        for i, (kind, model, parent) in enumerate(kinds)
    ]
    depths = page.evaluate(
        "async (steps) => { const { chainTree } = await import('./ui/static/views/chain.js');"
        " return chainTree(steps).map((row) => [row.step.id, row.depth]) }",
        steps,
    )
    assert depths == [["t", 0], ["s1", 1], ["s2", 2], ["s3", 2], ["s4", 3], ["s5", 4]]
