"""ultralytics' `predict`, called the way the server needs it: streaming (so progress and cancel
fit between images), with the stream always closed (a suspended generator holds the predictor's
lock), and models loaded only from verified weights or variants.

Call `configure_ultralytics` before loading (offline, safe load).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator
from contextlib import closing
from functools import partial
from typing import TYPE_CHECKING, Any

from yolo_orch.domain.variants import ExportFormat
from yolo_orch.params.inference import ForwardPassParams
from yolo_orch.registry.resolutions import ResolvedVariant
from yolo_orch.registry.weights import InvalidWeights, ModelTampered, ResolvedWeights, sha256_file
from yolo_orch.runners.formats import compile_openvino_for_lane, load_variant

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray
    from ultralytics.engine.results import Results
    from ultralytics.models import YOLO

    from yolo_orch.runners.decode import Decoded

__all__ = ["load_exported", "load_model", "predict_args", "predict_batch"]

log = logging.getLogger(__name__)


def load_model(device: str, weights: ResolvedWeights, params: ForwardPassParams) -> YOLO:
    """A model instance of `weights`, checked against its fingerprint and warmed up on `device`
    (the first predict sets up the predictor)."""
    import ultralytics.utils
    from ultralytics.models import YOLO

    if not ultralytics.utils.SAFE_LOAD:
        raise RuntimeError("ultralytics safe load is off: call configure_ultralytics() first")
    path = weights.path
    if path.suffix.lower() != ".pt":  # ultralytics treats any other suffix as an export format
        raise InvalidWeights(path, "the file name must end in .pt")
    if not path.is_file():  # ultralytics would go looking for a missing .pt online
        raise FileNotFoundError(f"weights file {path.name} is missing")
    started = time.perf_counter()
    actual = sha256_file(path)
    if actual != weights.sha256:
        raise ModelTampered(path, weights.sha256, actual)
    model = YOLO(str(path))
    # No `model.to(device)`: the predictor deep-copies the model, fuses it and moves that copy
    # to `device` (the warm-up below builds it). Moving the original as well would keep a
    # second, unused copy in GPU memory for every cached model.
    _warm_up(model, path.name, device, params, started)
    return model


def load_exported(
    device: str, resolved: ResolvedVariant, task: str, params: ForwardPassParams
) -> YOLO:
    """A model instance of an exported variant, every file checked against its manifest
    (`VariantTampered` otherwise), warmed up on `device`."""
    import torch

    started = time.perf_counter()
    model = load_variant(resolved, task)
    name = f"{resolved.variant.format} variant {resolved.variant.id}"
    # OpenVINO gets the CPU threads the runner gave torch in this worker thread (the lane's).
    tune = (
        partial(
            compile_openvino_for_lane,
            folder=resolved.entry,
            threads=torch.get_num_threads(),
            half=resolved.variant.lineage.half,
        )
        if resolved.variant.format is ExportFormat.OPENVINO
        else None
    )
    _warm_up(model, name, device, params, started, tune)
    return model


def _warm_up(
    model: YOLO,
    name: str,
    device: str,
    params: ForwardPassParams,
    started: float,
    tune: Callable[[YOLO], None] | None = None,
) -> None:
    """The first predict sets up the predictor; `tune` then adjusts its backend, and one more
    predict warms up what it changed."""
    import numpy as np

    loaded = time.perf_counter()
    blank: NDArray[np.uint8] = np.zeros((params.imgsz, params.imgsz, 3), dtype=np.uint8)
    _predict_one(model, blank, device, params)
    if tune is not None:
        tune(model)
        _predict_one(model, blank, device, params)
    log.info(
        "loaded %s on %s in %.0f ms, warmed up in %.0f ms",
        name,
        device,
        (loaded - started) * 1000,
        (time.perf_counter() - loaded) * 1000,
    )


def _predict_one(
    model: YOLO, image: NDArray[np.uint8], device: str, params: ForwardPassParams
) -> None:
    with closing(_stream(model, image, device, params)) as results:
        next(results)


def predict_args(device: str, params: ForwardPassParams) -> dict[str, Any]:
    """ultralytics' predict arguments for a job's params (those a task does not use are ignored
    by its predictor; submission refused any set to other than their defaults)."""
    half = params.half and device.startswith("cuda")
    return {
        "device": device,
        "imgsz": params.imgsz,
        "conf": params.conf,
        "iou": params.iou,
        "max_det": params.max_det,
        "classes": list(params.classes) if params.classes is not None else None,
        "quantize": 16 if half else None,  # `half=` is deprecated in favour of `quantize=`
        "verbose": False,
        "save": False,
    }


def predict_batch(
    model: YOLO, group: list[Decoded], device: str, params: ForwardPassParams
) -> Generator[tuple[Decoded, Results], None, None]:
    """Predict decoded images of one shape in one batch: one streaming predict, one forward pass
    (ultralytics batches a list source whole). Yields each input with its result, in order; the
    stream is closed when the caller stops early."""
    from ultralytics.engine.results import Results

    arrays = [image for _, image in group]
    with closing(_stream(model, arrays, device, params)) as results:
        count = 0
        for item, result in zip(group, results, strict=False):
            if not isinstance(result, Results):
                raise TypeError(f"predict yielded a {type(result).__name__}, not Results")
            count += 1
            yield item, result
        if count != len(group):
            raise RuntimeError(f"predict returned {count} results for {len(group)} images")


def _stream(
    model: YOLO,
    source: NDArray[np.uint8] | list[NDArray[np.uint8]],
    device: str,
    params: ForwardPassParams,
) -> Generator[Any, None, None]:
    results = model.predict(source=source, stream=True, **predict_args(device, params))
    if not isinstance(results, Generator):
        raise TypeError(f"predict(stream=True) returned a {type(results).__name__}")
    return results
