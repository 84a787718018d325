"""GPU telemetry and health against a fake NVML with the same function names as `pynvml`."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from yolo_orch.ops.telemetry import GpuReading, GpuTelemetry

NOT_SUPPORTED = 3
GPU_IS_LOST = 15
LIBRARY_NOT_FOUND = 12


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


@dataclass
class FakeGpu:
    used: int = 2 << 30
    total: int = 80 << 30
    utilization: int = 57
    temperature: int = 61
    milliwatts: int = 312_456
    uuid: str = "GPU-0000"
    failing: dict[str, int] = field(default_factory=dict)
    """Function name: the NVML error code it raises."""
    uncorrected_ecc: int = 0
    pages_pending: int = 0
    remapped_rows: tuple[int, int, int, int] = (0, 0, 0, 0)
    name: bytes = b"NVIDIA Fake 80GB"


class FakeNvml:
    """The part of `pynvml` that GpuTelemetry uses."""

    NVMLError = NVMLError
    NVML_ERROR_GPU_IS_LOST = GPU_IS_LOST
    NVML_ERROR_RESET_REQUIRED = 16
    NVML_TEMPERATURE_GPU = 0
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
    NVML_VOLATILE_ECC = 0
    NVML_FEATURE_ENABLED = 1

    def __init__(self, *gpus: FakeGpu, init_error: int | None = None) -> None:
        self.gpus = list(gpus)
        self.init_error = init_error
        self.inits = 0
        self.shutdowns = 0

    def nvmlInit(self) -> None:
        self.inits += 1
        if self.init_error is not None:
            raise NVMLError(self.init_error)

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeGpu:
        if not 0 <= index < len(self.gpus):
            raise NVMLError(2)  # invalid argument
        return self._check(self.gpus[index], "nvmlDeviceGetHandleByIndex")

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> FakeGpu:
        for gpu in self.gpus:
            if gpu.uuid == uuid:
                return gpu
        raise NVMLError(6)  # not found

    def nvmlDeviceGetMemoryInfo(self, gpu: FakeGpu) -> Any:
        self._check(gpu, "nvmlDeviceGetMemoryInfo")
        return SimpleNamespace(used=gpu.used, total=gpu.total, free=gpu.total - gpu.used)

    def nvmlDeviceGetUtilizationRates(self, gpu: FakeGpu) -> Any:
        self._check(gpu, "nvmlDeviceGetUtilizationRates")
        return SimpleNamespace(gpu=gpu.utilization, memory=10)

    def nvmlDeviceGetTemperature(self, gpu: FakeGpu, sensor: int) -> int:
        assert sensor == self.NVML_TEMPERATURE_GPU
        self._check(gpu, "nvmlDeviceGetTemperature")
        return gpu.temperature

    def nvmlDeviceGetName(self, gpu: FakeGpu) -> bytes:
        self._check(gpu, "nvmlDeviceGetName")
        return gpu.name

    def nvmlDeviceGetPowerUsage(self, gpu: FakeGpu) -> int:
        self._check(gpu, "nvmlDeviceGetPowerUsage")
        return gpu.milliwatts

    def nvmlDeviceGetTotalEccErrors(self, gpu: FakeGpu, error_type: int, counter: int) -> int:
        assert (error_type, counter) == (1, 0)  # uncorrected, volatile
        self._check(gpu, "nvmlDeviceGetTotalEccErrors")
        return gpu.uncorrected_ecc

    def nvmlDeviceGetRetiredPagesPendingStatus(self, gpu: FakeGpu) -> int:
        self._check(gpu, "nvmlDeviceGetRetiredPagesPendingStatus")
        return gpu.pages_pending

    def nvmlDeviceGetRemappedRows(self, gpu: FakeGpu) -> tuple[int, int, int, int]:
        self._check(gpu, "nvmlDeviceGetRemappedRows")
        return gpu.remapped_rows

    @staticmethod
    def _check(gpu: FakeGpu, name: str) -> FakeGpu:
        if name in gpu.failing:
            raise NVMLError(gpu.failing[name])
        return gpu


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
