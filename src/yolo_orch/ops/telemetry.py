"""GPU telemetry and health from NVML (`nvidia-ml-py`, imported as `pynvml`).

`GpuTelemetry` starts NVML on first use. Without the library, the driver or a GPU, every reading is
None and every device healthy: telemetry is extra information, never a reason to fail. A query
that fails leaves its field None and the others filled. Nothing here raises.

Devices are named by NVML index or by UUID (`GPU-...`). NVML numbers GPUs in PCI bus order; CUDA
does the same only under `CUDA_DEVICE_ORDER=PCI_BUS_ID` and without `CUDA_VISIBLE_DEVICES`, so
callers that know a device's UUID (`torch.cuda.get_device_properties(i).uuid`) should use it.

Health (`health`) is False when NVML says the device cannot be trusted until it is reset:
- a query answers "GPU is lost" (fallen off the bus, XID 79) or "reset required";
- uncorrectable ECC errors were counted since the driver loaded (volatile counter; XID 48);
- memory pages wait to be retired (pre-Ampere) or a row remap is pending or has failed (Ampere+).
Devices without ECC, retirement or remapping answer "not supported" and count as healthy.
XID events themselves need an NVML event set and a waiting thread; they are not watched here.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

log = logging.getLogger(__name__)

# NVML return codes and enums (nvml.h); the module's own names are used when it has them.
_GPU_IS_LOST = 15
_RESET_REQUIRED = 16
_TEMPERATURE_GPU = 0
_MEMORY_ERROR_TYPE_UNCORRECTED = 1
_VOLATILE_ECC = 0
_FEATURE_ENABLED = 1


@dataclass(frozen=True, slots=True)
class GpuReading:
    """One device at one moment; a field is None when its query failed or is not supported."""

    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    utilization_percent: int | None = None
    temperature_c: int | None = None
    power_w: float | None = None


class GpuTelemetry:
    """Lazily started NVML. `nvml` replaces the `pynvml` module (tests pass a fake with the
    same function names); `None` means import `pynvml` on first use."""

    def __init__(self, nvml: ModuleType | Any | None = None) -> None:
        self._nvml: Any = nvml
        self._lock = threading.Lock()
        self._started = False
        self._available = False

    @property
    def available(self) -> bool:
        """Whether NVML is usable (starts it on first call)."""
        return self._start() is not None

    def device_count(self) -> int:
        nvml = self._start()
        if nvml is None:
            return 0
        try:
            return int(nvml.nvmlDeviceGetCount())
        except Exception as exc:
            log.debug("nvmlDeviceGetCount failed: %s", exc)
            return 0

    def read(self, device: int | str) -> GpuReading | None:
        """Memory, utilization, temperature and power of `device`; None when NVML is not
        available or does not know the device."""
        nvml = self._start()
        if nvml is None:
            return None
        try:
            handle = self._handle(nvml, device)
        except Exception as exc:
            log.debug("no NVML handle for %r: %s", device, exc)
            return None
        memory = _query(nvml.nvmlDeviceGetMemoryInfo, handle)
        utilization = _query(nvml.nvmlDeviceGetUtilizationRates, handle)
        temperature = _query(
            nvml.nvmlDeviceGetTemperature,
            handle,
            getattr(nvml, "NVML_TEMPERATURE_GPU", _TEMPERATURE_GPU),
        )
        milliwatts = _query(nvml.nvmlDeviceGetPowerUsage, handle)
        return GpuReading(
            memory_used_bytes=None if memory is None else int(memory.used),
            memory_total_bytes=None if memory is None else int(memory.total),
            utilization_percent=None if utilization is None else int(utilization.gpu),
            temperature_c=None if temperature is None else int(temperature),
            power_w=None if milliwatts is None else round(milliwatts / 1000, 1),
        )

    def name(self, device: int | str) -> str | None:
        """The product name of `device` ("NVIDIA H100 80GB HBM3"); None when NVML cannot tell."""
        nvml = self._start()
        if nvml is None:
            return None
        try:
            value = nvml.nvmlDeviceGetName(self._handle(nvml, device))
        except Exception as exc:
            log.debug("no NVML name for %r: %s", device, exc)
            return None
        return value.decode() if isinstance(value, bytes) else str(value)

    def health(self, device: int | str) -> bool:
        """False when the device is lost or needs a reset (see the module's notes); True when it
        looks fine or NVML cannot tell."""
        nvml = self._start()
        if nvml is None:
            return True
        fatal = {
            getattr(nvml, "NVML_ERROR_GPU_IS_LOST", _GPU_IS_LOST),
            getattr(nvml, "NVML_ERROR_RESET_REQUIRED", _RESET_REQUIRED),
        }
        try:
            handle = self._handle(nvml, device)
            nvml.nvmlDeviceGetMemoryInfo(handle)  # the cheapest query that touches the GPU
        except Exception as exc:
            if _error_code(exc) in fatal:
                log.error("GPU %s is unhealthy: %s", device, exc)
                return False
            log.debug("NVML cannot tell the health of %r: %s", device, exc)
            return True
        reasons = self._reset_reasons(nvml, handle, fatal)
        if reasons:
            log.error("GPU %s needs a reset: %s", device, "; ".join(reasons))
            return False
        return True

    def close(self) -> None:
        with self._lock:
            if self._available:
                try:
                    self._nvml.nvmlShutdown()
                except Exception as exc:
                    log.debug("nvmlShutdown failed: %s", exc)
            self._started = False
            self._available = False

    def _reset_reasons(self, nvml: Any, handle: Any, fatal: set[int]) -> list[str]:
        enabled = getattr(nvml, "NVML_FEATURE_ENABLED", _FEATURE_ENABLED)
        uncorrected = getattr(
            nvml, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", _MEMORY_ERROR_TYPE_UNCORRECTED
        )
        volatile = getattr(nvml, "NVML_VOLATILE_ECC", _VOLATILE_ECC)
        checks: list[tuple[str, tuple[int, ...], Callable[[Any], bool]]] = [
            ("nvmlDeviceGetTotalEccErrors", (uncorrected, volatile), lambda n: int(n) > 0),
            ("nvmlDeviceGetRetiredPagesPendingStatus", (), lambda state: int(state) == enabled),
            # (corrected rows, uncorrected rows, remap pending, remap failed)
            ("nvmlDeviceGetRemappedRows", (), lambda rows: bool(rows[2]) or bool(rows[3])),
        ]
        reasons = []
        for name, args, bad in checks:
            query = getattr(nvml, name, None)
            if query is None:
                continue
            try:
                value = query(handle, *args)
            except Exception as exc:  # "not supported" on most boards: no opinion
                if _error_code(exc) in fatal:
                    reasons.append(f"{name}: {exc}")
                continue
            if bad(value):
                reasons.append(f"{name} = {value!r}")
        return reasons

    def _start(self) -> Any | None:
        with self._lock:
            if not self._started:
                self._started = True
                try:
                    if self._nvml is None:
                        self._nvml = importlib.import_module("pynvml")
                    self._nvml.nvmlInit()
                    self._available = True
                except Exception as exc:  # no module, no library, no driver, no GPU
                    log.info("GPU telemetry is off: %s", exc or type(exc).__name__)
            return self._nvml if self._available else None

    @staticmethod
    def _handle(nvml: Any, device: int | str) -> Any:
        if isinstance(device, str):
            return nvml.nvmlDeviceGetHandleByUUID(device)
        return nvml.nvmlDeviceGetHandleByIndex(device)


def _query(function: Any, *args: Any) -> Any | None:
    try:
        return function(*args)
    except Exception as exc:
        log.debug("%s failed: %s", getattr(function, "__name__", function), exc)
        return None


def _error_code(exc: BaseException) -> int | None:
    value = getattr(exc, "value", None)
    return value if isinstance(value, int) else None


@dataclass(frozen=True, slots=True)
class NodeReading:
    """A cluster node as it reads itself: its GPUs by NVML index (none without NVML), its load
    and its memory."""

    gpus: tuple[GpuReading, ...]
    load_1m: float
    memory_used_bytes: int | None
    memory_total_bytes: int | None
    read_at: float
    """Unix time on the node."""
