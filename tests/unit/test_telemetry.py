"""GPU telemetry and health against a fake NVML with the same function names as `pynvml`."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.nvml import GPU_IS_LOST, FakeGpu, FakeNvml
from yolo_orch.ops.telemetry import GpuReading, GpuTelemetry

NOT_SUPPORTED = 3
LIBRARY_NOT_FOUND = 12


def test_readings() -> None:
    nvml = FakeNvml(FakeGpu(), FakeGpu(used=0, utilization=0, uuid="GPU-1111"))
    telemetry = GpuTelemetry(nvml)
    assert nvml.inits == 0, "NVML starts on first use, not in the constructor"
    assert telemetry.device_count() == 2
    assert telemetry.read(0) == GpuReading(
        memory_used_bytes=2 << 30,
        memory_total_bytes=80 << 30,
        utilization_percent=57,
        temperature_c=61,
        power_w=312.5,
    )
    by_uuid = telemetry.read("GPU-1111")
    assert by_uuid is not None
    assert by_uuid.memory_used_bytes == 0
    assert by_uuid.utilization_percent == 0
    assert telemetry.read(7) is None
    assert telemetry.read("GPU-none") is None
    assert nvml.inits == 1
    telemetry.close()
    assert nvml.shutdowns == 1


def test_a_failed_query_leaves_only_its_fields_empty() -> None:
    gpu = FakeGpu(
        failing={"nvmlDeviceGetPowerUsage": NOT_SUPPORTED, "nvmlDeviceGetUtilizationRates": 999}
    )
    reading = GpuTelemetry(FakeNvml(gpu)).read(0)
    assert reading == GpuReading(
        memory_used_bytes=2 << 30, memory_total_bytes=80 << 30, temperature_c=61
    )


def test_a_healthy_gpu_without_ecc_support() -> None:
    unsupported = {
        name: NOT_SUPPORTED
        for name in (
            "nvmlDeviceGetTotalEccErrors",
            "nvmlDeviceGetRetiredPagesPendingStatus",
            "nvmlDeviceGetRemappedRows",
        )
    }
    telemetry = GpuTelemetry(FakeNvml(FakeGpu(), FakeGpu(failing=unsupported)))
    assert telemetry.health(0)
    assert telemetry.health(1)


def test_a_lost_gpu_is_unhealthy() -> None:
    lost = FakeGpu(failing=dict.fromkeys(_all_queries(), GPU_IS_LOST))
    telemetry = GpuTelemetry(FakeNvml(FakeGpu(), lost))
    assert telemetry.health(0)
    assert not telemetry.health(1)
    assert telemetry.read(1) == GpuReading()  # still answers, with nothing known


def test_lost_only_on_a_later_query_is_unhealthy() -> None:
    gpu = FakeGpu(failing={"nvmlDeviceGetRemappedRows": GPU_IS_LOST})
    assert not GpuTelemetry(FakeNvml(gpu)).health(0)


@pytest.mark.parametrize(
    "gpu",
    [
        FakeGpu(uncorrected_ecc=2),
        FakeGpu(pages_pending=1),
        FakeGpu(remapped_rows=(0, 1, 1, 0)),  # a remap waits for a reset
        FakeGpu(remapped_rows=(0, 0, 0, 1)),  # a remap failed
    ],
)
def test_a_gpu_that_needs_a_reset_is_unhealthy(gpu: FakeGpu) -> None:
    assert not GpuTelemetry(FakeNvml(gpu)).health(0)


def test_corrected_remaps_are_fine() -> None:
    assert GpuTelemetry(FakeNvml(FakeGpu(remapped_rows=(3, 0, 0, 0)))).health(0)


def test_an_unknown_device_is_not_called_unhealthy() -> None:
    assert GpuTelemetry(FakeNvml(FakeGpu())).health(5)


def test_without_nvml_library_nothing_is_known_and_all_is_healthy() -> None:
    nvml = FakeNvml(FakeGpu(), init_error=LIBRARY_NOT_FOUND)
    telemetry = GpuTelemetry(nvml)
    assert not telemetry.available
    assert telemetry.read(0) is None
    assert telemetry.health(0)
    assert telemetry.device_count() == 0
    telemetry.close()
    assert nvml.inits == 1, "a failed start is not retried on every call"
    assert nvml.shutdowns == 0


def test_without_the_module(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    def no_module(name: str) -> Any:
        raise ModuleNotFoundError(f"No module named {name!r}")

    monkeypatch.setattr(importlib, "import_module", no_module)
    telemetry = GpuTelemetry()
    assert telemetry.read(0) is None
    assert telemetry.health(0)


def test_the_real_module_on_this_host_never_raises() -> None:
    """On a host without a GPU or driver `pynvml` fails to start: telemetry is simply off."""
    telemetry = GpuTelemetry()
    count = telemetry.device_count()
    for index in range(count):
        assert telemetry.read(index) is not None
        telemetry.health(index)
    if count == 0:
        assert telemetry.read(0) is None
        assert telemetry.health(0)
    telemetry.close()


def _all_queries() -> list[str]:
    return [
        "nvmlDeviceGetMemoryInfo",
        "nvmlDeviceGetUtilizationRates",
        "nvmlDeviceGetTemperature",
        "nvmlDeviceGetPowerUsage",
        "nvmlDeviceGetTotalEccErrors",
        "nvmlDeviceGetRetiredPagesPendingStatus",
        "nvmlDeviceGetRemappedRows",
    ]
