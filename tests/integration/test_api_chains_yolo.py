"""Chains with real models on the CPU: a tiny training's chain validates, exports and promotes
its model to an alias when the gate passes; a second chain whose model fails the gate (and is
compared with the alias's current model, validated in the same chain) leaves the alias where
it was, and its promotion says why, with the figures."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import serve, wait_terminal
from yolo_orch.app import create_app
from yolo_orch.config import Settings
from yolo_orch.testing.training import make_dataset
from yolo_orch.testing.yolo import ensure_ultralytics

FAST = {"epochs": 2, "imgsz": 64, "batch": 8}


@pytest.fixture
async def client(
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    settings_factory: Callable[..., Settings],
) -> AsyncIterator[httpx.AsyncClient]:
    ensure_ultralytics(tmp_path_factory.getbasetemp())
    data = tmp_path / "data"
    make_dataset(data / "ds")
    settings = settings_factory(runtime="auto", database_url="", data_roots=[data])
    async with serve(create_app(settings)) as client:
        yield client


async def _chain(client: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    response = await client.post("/v1/jobs", json=body)
    assert response.status_code == 202, response.text
    chain_id = response.json()["id"]
    while True:
        chain: dict[str, Any] = (await client.get(f"/v1/chains/{chain_id}")).json()
        unfinished = [s for s in chain["steps"] if s["state"] in ("queued", "running")]
        if not unfinished:
            return chain
        await wait_terminal(client, unfinished[-1]["id"], deadline_s=300)


def _training(name: str, then: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "training",
        "model": "yolo11n.yaml",
        "dataset": "ds/data.yaml",
        "params": {**FAST, "output_name": name},
        "then": then,
    }


async def test_a_chain_promotes_when_its_gate_passes_and_not_when_it_fails(
    client: httpx.AsyncClient,
) -> None:
    passes = await _chain(
        client,
        _training(
            "cand-a",
            {
                "validate": {"params": {"imgsz": 64}},
                "export": {"formats": ["torchscript"]},
                "promote": {"alias": "det@production", "gate": {"metric": "mAP50", "min": 0}},
            },
        ),
    )
    assert passes["state"] == "succeeded", passes
    assert passes["promoted"] is True
    training, validation, export, promotion = passes["steps"]
    produced = training["result"]["model_id"]
    assert [step["model_id"] for step in (validation, export, promotion)] == [produced] * 3
    assert export["result"]["format"] == "torchscript"
    gate = promotion["result"]["gate"]
    assert gate["passed"] is True
    assert gate["candidate"] == validation["result"]["metrics"]["mAP50"]
    assert promotion["result"]["from_model_id"] is None
    assert promotion["result"]["to_model_id"] == produced
    alias = (await client.get("/v1/models/det/aliases/production")).json()
    assert alias["model_id"] == produced
    assert alias["updated_by"] == f"chain:{training['id']}"

    # A job naming the alias runs the promoted model, and says so.
    infer = await client.post(
        "/v1/jobs",
        json={"kind": "inference", "model": "det@production", "inputs": ["ds/images/val/*.png"]},
    )
    ran = await wait_terminal(client, infer.json()["id"], deadline_s=60)
    assert (ran["state"], ran["model"], ran["model_id"]) == (
        "succeeded",
        "det@production",
        produced,
    )

    fails = await _chain(
        client,
        _training(
            "cand-b",
            {
                "validate": {"params": {"imgsz": 64}},
                "promote": {
                    "alias": "det@production",
                    "gate": {"metric": "mAP50", "min": 1.01, "not_worse": True},
                },
            },
        ),
    )
    # A failed gate ends the chain succeeded, with nothing promoted and the figures that decided.
    assert fails["state"] == "succeeded", fails
    assert fails["promoted"] is False
    kinds = [step["kind"] for step in fails["steps"]]
    assert kinds == ["training", "validation", "validation", "promote"]
    candidate, baseline, promotion = fails["steps"][1:]
    assert baseline["model"] == "det@production"
    assert baseline["model_id"] == produced  # the alias's model, scored on the same split
    assert baseline["split"] == candidate["split"] == "val"
    gate = promotion["result"]["gate"]
    assert gate["passed"] is False
    assert gate["baseline"] == baseline["result"]["metrics"]["mAP50"]
    assert any("is not at least 1.01" in reason for reason in gate["reasons"])
    assert promotion["result"]["to_model_id"] is None
    assert (await client.get("/v1/models/det/aliases/production")).json()["model_id"] == produced
    history = (await client.get("/v1/models/det/aliases/production/history")).json()["moves"]
    assert [(m["from_model_id"], m["to_model_id"]) for m in history] == [(None, produced)]


async def test_a_gate_not_worse_than_an_alias_not_set_yet_has_no_baseline_step(
    client: httpx.AsyncClient,
) -> None:
    """The first promotion to an alias sets it: there is nothing to compare with yet."""
    gate = {"metric": "mAP50", "min": 0, "not_worse": True}
    response = await client.post(
        "/v1/jobs",
        json=_training(
            "first", {"validate": {}, "promote": {"alias": "fresh@production", "gate": gate}}
        ),
    )
    assert response.status_code == 202, response.text
    chain_id = response.json()["id"]
    chain = (await client.post(f"/v1/chains/{chain_id}/cancel")).json()
    assert [step["kind"] for step in chain["steps"]] == ["training", "validation", "promote"]
