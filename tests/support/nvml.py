"""A fake NVML, for the tests of GPU telemetry and of lanes that follow it."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

GPU_IS_LOST = 15


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
