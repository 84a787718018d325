"""Inference jobs on ultralytics YOLO models, with loaded models kept warm per device.

Thread model: the dispatcher runs each job in a worker thread and a lane runs at most `slots` jobs
at once. A loaded model instance is never shared: a job checks an instance out of its lane's cache
for the whole job (a busy model makes a second job load its own instance) and gives it back at
the end. ultralytics' `predict` updates predictor arguments outside its lock, so a shared instance
would mix up two jobs' `conf`/`imgsz`.

CPU threads: `torch.set_num_threads` is partly per OS thread (OpenMP) and partly process-wide
(MKL), and importing ultralytics sets `OMP_NUM_THREADS=1`. So every job sets the thread count in
its own worker thread, and all jobs use one value per lane kind, so concurrent jobs never fight
over a process-wide setting: `cpu_threads` (default: all cores but one, see
`default_cpu_threads`) on the `cpu` lane, 1 on CUDA lanes, where the model runs on the GPU and
torch's CPU pool has almost nothing to do.

Batching: a job's images are decoded a chunk at a time (`_batch_size`, fewer at large imgsz or
for huge images); undecodable files become error entries, and the decodable ones go through one
streaming `predict` per shape, which ultralytics runs as one batch (one forward pass). Progress is
reported and cancel checked after every image; a stream left early is closed at once.

Call `configure_ultralytics` before constructing the runner (offline, safe load).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from yolo_orch import images
from yolo_orch.domain import JobResult, JsonObject, Progress
from yolo_orch.errors import InvalidJobInput, JobCancelled
from yolo_orch.inputs import read_contained
from yolo_orch.jobfiles import INPUTS_DIR
from yolo_orch.params.inference import InferenceParams
from yolo_orch.runners.base import RunContext
from yolo_orch.weights import InvalidWeights, ModelTampered, ResolvedWeights, sha256_file

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray
    from ultralytics.engine.results import Results
    from ultralytics.models import YOLO

__all__ = ["YoloInferenceRunner", "default_cpu_threads"]

log = logging.getLogger(__name__)

SUPPORTED_TASKS = frozenset({"detect", "segment", "pose"})
"""Tasks whose results carry boxes; classification and OBB models are refused."""

ResolveWeights = Callable[[str], ResolvedWeights]


@dataclass
class _Lane:
    lock: threading.Lock = field(default_factory=threading.Lock)
    idle: OrderedDict[str, YOLO] = field(default_factory=OrderedDict)
    """Loaded instances nobody is using, least recently used first."""
    busy: Counter[str] = field(default_factory=Counter)
    """Checked-out instances per sha256."""
    generation: int = 0
    """Bumped when the lane is flushed: instances checked out before are not taken back."""


class YoloInferenceRunner:
    """Runs inference jobs: `spec["files"]` (the images the server resolved at submission, each
    `{"path": <absolute path>, "name": <what the client called it>}`) through the job's model."""

    def __init__(
        self,
        resolve_weights: ResolveWeights,
        model_cache_size: int = 2,
        cpu_threads: int | None = None,
        max_image_pixels: int = images.DEFAULT_MAX_IMAGE_PIXELS,
        *,
        data_roots: Sequence[Path],
    ) -> None:
        """`data_roots`: every input is read only if it is still inside them (or inside the
        job's own uploaded inputs) where it is opened."""
        if model_cache_size < 0:
            raise ValueError("model_cache_size must be >= 0")
        self._resolve_weights = resolve_weights
        self._data_roots = list(data_roots)
        self._cache_size = model_cache_size
        self._cpu_threads = cpu_threads if cpu_threads is not None else default_cpu_threads()
        self._max_image_pixels = max_image_pixels
        self._lanes: dict[str, _Lane] = {}
        self._lanes_lock = threading.Lock()
        self._loads = 0
        self._hits = 0

    @property
    def cache_hits(self) -> int:
        """Jobs that found their model loaded and idle on their lane."""
        return self._hits

    @property
    def loads(self) -> int:
        """How many model instances were loaded since start (a cache-miss counter)."""
        return self._loads

    def cached_models(self, device: str) -> list[str]:
        """sha256s of the models loaded on `device`: idle ones, least recently used first, then
        the ones only in use."""
        lane = self._lane(device)
        with lane.lock:
            idle = list(lane.idle)
            return idle + [sha for sha, n in lane.busy.items() if n > 0 and sha not in lane.idle]

    def run(self, ctx: RunContext) -> JobResult:
        import torch

        if len(ctx.devices) != 1:
            raise InvalidJobInput(f"an inference job runs on one device, not {ctx.devices!r}")
        device = ctx.devices[0]
        params = InferenceParams.from_job(ctx.job.params)
        sources = _inputs(ctx.job.spec)
        weights = self._resolve_weights(ctx.job.model_id or ctx.job.model)
        torch.set_num_threads(self._cpu_threads if device == "cpu" else 1)
        ctx.report_progress(Progress(0, len(sources), "images"))
        try:
            with self._checkout(device, weights, params) as model:
                if model.task not in SUPPORTED_TASKS:
                    raise InvalidJobInput(
                        f"model {ctx.job.model!r} is a {model.task!r} model; inference jobs run "
                        f"{', '.join(sorted(SUPPORTED_TASKS))} models"
                    )
                return self._run_images(ctx, model, device, params, sources)
        except torch.cuda.OutOfMemoryError as e:
            self._flush(device)
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            raise RuntimeError(f"CUDA out of memory: {e}") from e

    def _run_images(
        self,
        ctx: RunContext,
        model: YOLO,
        device: str,
        params: InferenceParams,
        sources: list[InputFile],
    ) -> JobResult:
        artifacts: Path | None = None
        if params.save_annotated:
            artifacts = ctx.workdir / "artifacts"
            artifacts.mkdir(parents=True, exist_ok=True)
        total = len(sources)
        entries: list[JsonObject | None] = [None] * total
        done = 0
        batch_size = _batch_size(params.imgsz)

        def finished(index: int, entry: JsonObject) -> None:
            nonlocal done
            entries[index] = entry
            done += 1
            ctx.report_progress(Progress(done, total, "images"))

        def check_cancel() -> None:
            if done < total and ctx.should_cancel():
                raise JobCancelled(f"cancelled after {done} of {total} images")

        check_cancel()
        roots = [*self._data_roots, ctx.workdir / INPUTS_DIR]
        for chunk in _decoded_chunks(sources, batch_size, roots, self._max_image_pixels):
            decoded: list[tuple[int, NDArray[np.uint8]]] = []
            for index, image in chunk:
                if isinstance(image, str):
                    finished(index, {"source": sources[index].name, "error": image})
                    check_cancel()
                else:
                    decoded.append((index, image))
            for group in _same_shape_groups(decoded):
                # closed at once if we stop early, not when the exception's traceback goes
                with closing(_predict_batch(model, group, device, params)) as predictions:
                    for (index, image), result in predictions:
                        entry = _entry(sources[index], image, result)
                        if artifacts is not None:
                            entry["annotated"] = _save_annotated(
                                result, artifacts, index, sources[index].path
                            )
                        finished(index, entry)
                        check_cancel()
        images = [entry for entry in entries if entry is not None]
        failed = sum(1 for image in images if "error" in image)
        detections = sum(len(image.get("detections", ())) for image in images)
        return JobResult(
            summary={"images": len(images), "detections": detections, "failed_images": failed},
            detail={"images": images},
        )

    # --- the per-lane model cache ---

    def _lane(self, device: str) -> _Lane:
        with self._lanes_lock:
            return self._lanes.setdefault(device, _Lane())

    @contextmanager
    def _checkout(
        self, device: str, weights: ResolvedWeights, params: InferenceParams
    ) -> Iterator[YOLO]:
        lane = self._lane(device)
        sha = weights.sha256
        with lane.lock:
            model = lane.idle.pop(sha, None)
            lane.busy[sha] += 1
            generation = lane.generation
        if model is not None:
            # `_hits`, like `_loads`, is shared by all lanes: count under `_lanes_lock`, not the
            # lane's own lock, or two lanes' increments can race.
            with self._lanes_lock:
                self._hits += 1
        keep = False
        try:
            if model is None:
                model = self._load(device, weights, params)
            yield model
            keep = True
        except (JobCancelled, InvalidJobInput):
            keep = True  # the job stopped, the model is fine
            raise
        finally:
            with lane.lock:
                lane.busy[sha] -= 1
                if lane.busy[sha] <= 0:
                    del lane.busy[sha]
                if keep and model is not None and generation == lane.generation:
                    self._put_idle(lane, sha, model)

    def _put_idle(self, lane: _Lane, sha: str, model: YOLO) -> None:
        if self._cache_size == 0:
            return
        if sha in lane.idle:  # another job's instance came back first: keep one
            lane.idle.move_to_end(sha)
            return
        lane.idle[sha] = model
        while len(lane.idle) > self._cache_size:
            lane.idle.popitem(last=False)

    def _flush(self, device: str) -> None:
        lane = self._lane(device)
        with lane.lock:
            lane.idle.clear()
            lane.generation += 1

    def _load(self, device: str, weights: ResolvedWeights, params: InferenceParams) -> YOLO:
        import numpy as np
        import ultralytics.utils
        from ultralytics.models import YOLO

        if not ultralytics.utils.SAFE_LOAD:
            raise RuntimeError("ultralytics safe load is off: call configure_ultralytics() first")
        path = weights.path
        if path.suffix.lower() != ".pt":  # ultralytics treats any other suffix as an export format
            raise InvalidWeights(path, "the file name must end in .pt")
        if not path.is_file():  # ultralytics would go looking for a missing .pt online
            raise FileNotFoundError(f"weights file {path} is missing")
        started = time.perf_counter()
        actual = sha256_file(path)
        if actual != weights.sha256:
            raise ModelTampered(path, weights.sha256, actual)
        model = YOLO(str(path))
        # No `model.to(device)`: the predictor deep-copies the model, fuses it and moves that copy
        # to `device` (the warm-up below builds it). Moving the original as well would keep a
        # second, unused copy in GPU memory for every cached model.
        loaded = time.perf_counter()
        blank: NDArray[np.uint8] = np.zeros((params.imgsz, params.imgsz, 3), dtype=np.uint8)
        _predict_first(model, blank, device, params)
        log.info(
            "loaded %s on %s in %.0f ms, warmed up in %.0f ms",
            path.name,
            device,
            (loaded - started) * 1000,
            (time.perf_counter() - loaded) * 1000,
        )
        with self._lanes_lock:
            self._loads += 1
        return model


def default_cpu_threads() -> int:
    """torch threads for inference on the `cpu` lane: all cores but one. The spare core runs the
    event loop, HTTP and the store writer; with every core in torch's pool, each of the ~100 ops of
    a forward pass ends in a barrier that waits for whichever pool thread the OS has descheduled
    (bench.inference_overhead, 2 shared cores, 32-image jobs, server run time: 11-73 img/s, median
    19, with 2 threads; 28-56 with 1).
    """
    return max(1, (os.cpu_count() or 1) - 1)


def _predict_args(device: str, params: InferenceParams) -> dict[str, Any]:
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


def _predict_first(
    model: YOLO, image: NDArray[np.uint8], device: str, params: InferenceParams
) -> Results:
    """Predict one image through a streaming predict, and close the stream: a suspended
    generator holds the predictor's lock."""
    from ultralytics.engine.results import Results

    results = model.predict(source=image, stream=True, **_predict_args(device, params))
    if not isinstance(results, Generator):
        raise TypeError(f"predict(stream=True) returned a {type(results).__name__}")
    try:
        result = next(results)
    finally:
        results.close()
    if not isinstance(result, Results):
        raise TypeError(f"predict yielded a {type(result).__name__}, not Results")
    return result


def _predict_batch(
    model: YOLO,
    group: list[tuple[int, NDArray[np.uint8]]],
    device: str,
    params: InferenceParams,
) -> Generator[tuple[tuple[int, NDArray[np.uint8]], Results], None, None]:
    """Predict decoded images of one shape in one batch: one streaming predict, one forward pass
    (ultralytics batches a list source whole). Yields each input with its result, in order; the
    stream is closed when the caller stops early (a suspended generator holds the predictor's
    lock)."""
    from ultralytics.engine.results import Results

    arrays = [image for _, image in group]
    results = model.predict(source=arrays, stream=True, **_predict_args(device, params))
    if not isinstance(results, Generator):
        raise TypeError(f"predict(stream=True) returned a {type(results).__name__}")
    try:
        count = 0
        for item, result in zip(group, results, strict=False):
            if not isinstance(result, Results):
                raise TypeError(f"predict yielded a {type(result).__name__}, not Results")
            count += 1
            yield item, result
        if count != len(group):
            raise RuntimeError(f"predict returned {count} results for {len(group)} images")
    finally:
        results.close()


def _entry(source: InputFile, image: NDArray[np.uint8], result: Results) -> JsonObject:
    height, width = image.shape[:2]
    return {
        "source": source.name,
        "width": int(width),
        "height": int(height),
        "detections": _detections(result),
    }


MAX_BATCH = 32
"""Images per forward pass, at most."""
BATCH_PIXELS = 16 * 640 * 640
"""Letterboxed pixels per forward pass, at most: 32 images at imgsz 320 or less, 16 at 640 (the
memory of a batch grows with images x imgsz^2), 4 at 1280, 1 from 2560."""
MAX_CHUNK_BYTES = 256 * 1024 * 1024
"""Decoded pixels held at once: a chunk ends early once its images reach this size."""


def _batch_size(imgsz: int) -> int:
    """Batching amortises per-forward costs: on CPU each op's thread-pool barrier and, in the
    server, the GIL hand-back after each op while the event loop holds it (bench.inference_overhead,
    32-image jobs at imgsz 320 on 2 shared cores: server/direct median 0.78 with batches of 16,
    0.94 with 32); on CUDA kernel launches."""
    return max(1, min(MAX_BATCH, BATCH_PIXELS // (imgsz * imgsz)))


def _decoded_chunks(
    sources: list[InputFile], size: int, roots: Sequence[Path], max_pixels: int
) -> Iterator[list[tuple[int, NDArray[np.uint8] | str]]]:
    """The job's images decoded, `size` at a time (fewer once a chunk holds MAX_CHUNK_BYTES of
    pixels): each as (index, pixels) or (index, why it cannot be read)."""
    chunk: list[tuple[int, NDArray[np.uint8] | str]] = []
    held = 0
    for index, source in enumerate(sources):
        image = _decode(source.path, roots, max_pixels)
        chunk.append((index, image))
        if not isinstance(image, str):
            held += image.nbytes
        if len(chunk) >= size or held >= MAX_CHUNK_BYTES:
            yield chunk
            chunk, held = [], 0
    if chunk:
        yield chunk


def _same_shape_groups(
    decoded: list[tuple[int, NDArray[np.uint8]]],
) -> list[list[tuple[int, NDArray[np.uint8]]]]:
    """Images of one shape per batch, in order of first appearance: ultralytics letterboxes a batch
    of equal shapes to the minimal rectangle (as for a single image) but pads a mixed batch to a
    square, which would change an image's detections with its neighbours."""
    groups: dict[tuple[int, ...], list[tuple[int, NDArray[np.uint8]]]] = {}
    for item in decoded:
        groups.setdefault(tuple(item[1].shape), []).append(item)
    return list(groups.values())


def _decode(source: Path, roots: Sequence[Path], max_pixels: int) -> NDArray[np.uint8] | str:
    """The image as BGR pixels, or why it cannot be read. Decoding here, one image at a time, keeps
    one bad file from failing the whole job (ultralytics raises for the batch). Its header is read
    first: an image of more than `max_pixels` is never decoded."""
    import cv2
    import numpy as np

    refused = images.decode_refusal(source, max_pixels)
    if refused is not None:
        return refused
    try:
        data = np.frombuffer(read_contained(source, roots), dtype=np.uint8)
    except InvalidJobInput as e:
        return e.message
    image = cv2.imdecode(data, cv2.IMREAD_COLOR) if data.size else None
    if image is None:
        return "cannot decode the file as an image"
    return image  # type: ignore[return-value]  # cv2 types pixels as MatLike


def _detections(result: Results) -> list[JsonObject]:
    boxes = result.boxes
    if boxes is None or len(boxes) == 0:
        return []
    names: dict[int, str] = result.names
    detections: list[JsonObject] = []
    # One list conversion per image, of `Boxes.data` (x1 y1 x2 y2 [track id] conf cls; its values
    # are Python floats already): with up to max_det boxes, converting xyxy, conf and cls apart and
    # a float() per value cost 40 % more.
    for row in boxes.data.tolist():
        x1, y1, x2, y2 = row[:4]
        conf, cls = row[-2], row[-1]
        class_id = int(cls)
        detections.append(
            {
                "class_id": class_id,
                "class_name": names.get(class_id, str(class_id)),
                "confidence": round(conf, 5),
                "box": {
                    "x1": round(x1, 2),
                    "y1": round(y1, 2),
                    "x2": round(x2, 2),
                    "y2": round(y2, 2),
                },
            }
        )
    return detections


def _save_annotated(result: Results, artifacts: Path, index: int, source: Path) -> str:
    import cv2

    name = f"{index:05d}_{source.stem}.jpg"
    ok, encoded = cv2.imencode(".jpg", result.plot())
    if not ok:
        raise RuntimeError(f"could not encode the annotated image for {source}")
    tmp = artifacts / f".{name}.tmp"
    tmp.write_bytes(encoded.tobytes())
    os.replace(tmp, artifacts / name)
    return name


@dataclass(frozen=True)
class InputFile:
    path: Path
    """Absolute, resolved by the server at submission."""
    name: str
    """What the client called it; the result reports this, not server paths."""


def _inputs(spec: JsonObject) -> list[InputFile]:
    raw = spec.get("files")
    if not isinstance(raw, list) or not raw:
        raise InvalidJobInput("spec.files must be a non-empty list of resolved images")
    files = []
    for entry in raw:
        if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
            raise InvalidJobInput(f"spec.files entries need a path: {entry!r}")
        path = Path(entry["path"])
        if not path.is_absolute():
            raise InvalidJobInput(f"spec.files must hold absolute paths: {str(path)!r}")
        files.append(InputFile(path, str(entry.get("name", path.name))))
    return files
