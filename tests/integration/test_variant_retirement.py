"""A variant that fails `variant_retire_after_failures` consecutive jobs with `runtime_error` is
retired, with the reason in its JSON, and `format: auto` runs the `.pt` again; a success starts
the count again, and failures that are not the variant's count for nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.support.export_host import Host, host, infer
from yolo_orch.registry.models import ModelRegistry
from yolo_orch.registry.variant_store import VariantRegistry
from yolo_orch.runners import inference
from yolo_orch.runners.variant_check import check_on_cpu
from yolo_orch.store.memory_models import InMemoryModelStore

__all__ = ["host"]  # the fixture, shared with the export tests


@pytest.mark.parametrize("host_settings", [{"variant_retire_after_failures": 2}])
async def test_a_variant_that_fails_its_jobs_in_a_row_is_retired_and_auto_runs_the_pt(
    host: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    await host.import_tiny()
    exported = await host.export(format="onnx")
    assert exported["state"] == "succeeded", exported["error"]
    variant_id = exported["result"]["variant_id"]

    def broken(*args: Any) -> Any:  # what an ONNX Runtime that cannot run the graph raises
        raise RuntimeError("[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : Non-zero status code")

    monkeypatch.setattr(inference, "load_exported", broken)
    failed = [await infer(host) for _ in range(2)]
    after = await infer(host)

    for job in failed:
        assert job["state"] == "failed"
        assert job["error"]["code"] == "runtime_error"
    [variant] = await host.variants()
    assert variant["id"] == variant_id
    assert variant["usable"] is False
    assert variant["unusable_reason"].startswith("retired after 2 consecutive jobs failed")
    assert "RUNTIME_EXCEPTION" in variant["unusable_reason"]
    assert after["state"] == "succeeded", after["error"]
    assert (after["result"]["format"], after["result"]["variant_id"]) == ("pt", None)


def registry(tmp_path: Path) -> VariantRegistry:
    def no_inspect(path: Path) -> Any:
        raise AssertionError("nothing is imported here")

    return ModelRegistry(
        InMemoryModelStore(), tmp_path, [], no_inspect, check_variant=check_on_cpu(tmp_path)
    ).variants


async def test_a_success_starts_the_count_again(tmp_path: Path) -> None:
    variants = registry(tmp_path)
    retired: list[tuple[str, str]] = []

    async def mark_unusable(variant_id: str, reason: str) -> None:
        retired.append((variant_id, reason))

    variants.mark_unusable = mark_unusable  # type: ignore[method-assign]

    await variants.record_runs("v", ["boom", "boom"])
    await variants.record_runs("v", [None, "boom"])
    await variants.record_runs("v", ["boom"])
    assert retired == []  # two since the success

    await variants.record_runs("v", ["boom: the third"])
    [(variant_id, reason)] = retired
    assert variant_id == "v"
    assert reason.endswith("the last: boom: the third")


async def test_concurrent_records_of_one_variant_count_every_failure(tmp_path: Path) -> None:
    variants = registry(tmp_path)
    retired: list[str] = []

    async def mark_unusable(variant_id: str, reason: str) -> None:
        retired.append(variant_id)

    variants.mark_unusable = mark_unusable  # type: ignore[method-assign]

    await asyncio.gather(*(variants.record_runs("v", ["boom"]) for _ in range(3)))

    assert retired == ["v"]
