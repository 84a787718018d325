"""A job's images: which files, read and decoded a chunk at a time, grouped by shape for batches.

Undecodable files become error entries, and the decodable ones go through one streaming `predict`
per shape, which ultralytics runs as one batch (one forward pass).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from yolo_orch.domain import Job
from yolo_orch.domain.specs import InferenceSpec
from yolo_orch.errors import InvalidJobInput
from yolo_orch.files import images
from yolo_orch.files.inputs import open_contained

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    Decoded = tuple[int, NDArray[np.uint8]]
    """An image's index in the job, and its BGR pixels."""

_Owner = TypeVar("_Owner")

MAX_BATCH = 32
"""Images per forward pass, at most."""
BATCH_PIXELS = 16 * 640 * 640
"""Letterboxed pixels per forward pass, at most: 32 images at imgsz 320 or less, 16 at 640 (the
memory of a batch grows with images x imgsz^2), 4 at 1280, 1 from 2560."""
MAX_CHUNK_BYTES = 256 * 1024 * 1024
"""Decoded pixels held at once: a chunk ends early once its images reach this size."""


@dataclass(frozen=True)
class InputFile:
    path: Path
    """Absolute, resolved by the server at submission."""
    name: str
    """What the client called it; the result reports this, not server paths."""
    refused: str | None = None
    """Why it is not read at all: the server, which read it for a Ray node, refused it."""


def read_inputs(job: Job) -> list[InputFile]:
    """The images the server resolved at submission: `spec.files`."""
    resolved = job.spec_as(InferenceSpec).files
    if not resolved:
        raise InvalidJobInput("spec.files must be a non-empty list of resolved images")
    files = []
    for entry in resolved:
        path = Path(entry.path)
        if not path.is_absolute():
            raise InvalidJobInput(f"spec.files must hold absolute paths: {str(path)!r}")
        files.append(InputFile(path, entry.shown_name, entry.refused))
    return files


def batch_size(imgsz: int) -> int:
    """Batching amortises per-forward costs: on CPU each op's thread-pool barrier and, in the
    server, the GIL hand-back after each op while the event loop holds it (bench.inference_overhead,
    32-image jobs at imgsz 320 on 2 shared cores: server/direct median 0.78 with batches of 16,
    0.94 with 32); on CUDA kernel launches."""
    return max(1, min(MAX_BATCH, BATCH_PIXELS // (imgsz * imgsz)))


def decoded_chunks(
    sources: list[InputFile],
    size: int,
    roots: Sequence[Path],
    max_pixels: int,
    decoded_ahead: Callable[[Path], NDArray[np.uint8] | str | None] = lambda path: None,
) -> Iterator[list[tuple[int, NDArray[np.uint8] | str]]]:
    """The job's images decoded, `size` at a time (fewer once a chunk holds MAX_CHUNK_BYTES of
    pixels): each as (index, pixels) or (index, why it cannot be read). A file is read only while
    it is inside `roots`, and decoded only if its header says it has at most `max_pixels`.
    `decoded_ahead`: what was decoded for a file before its job ran (`DecodeAhead.take`), None
    when the file must be decoded here."""
    chunk: list[tuple[int, NDArray[np.uint8] | str]] = []
    held = 0
    for index, source in enumerate(sources):
        image = source.refused or decoded_ahead(source.path)
        if image is None:
            image = decode_image(source.path, roots, max_pixels)
        chunk.append((index, image))
        if not isinstance(image, str):
            held += image.nbytes
        if len(chunk) >= size or held >= MAX_CHUNK_BYTES:
            yield chunk
            chunk, held = [], 0
    if chunk:
        yield chunk


def same_shape_groups(decoded: list[tuple[_Owner, Decoded]]) -> list[list[tuple[_Owner, Decoded]]]:
    """Images of one shape per batch (each with whatever it belongs to: its job), in order of
    first appearance: ultralytics letterboxes a batch of equal shapes to the minimal rectangle (as
    for a single image) but pads a mixed batch to a square, which would change an image's
    detections with its neighbours."""
    groups: dict[tuple[int, ...], list[tuple[_Owner, Decoded]]] = {}
    for owner, item in decoded:
        groups.setdefault(tuple(item[1].shape), []).append((owner, item))
    return list(groups.values())


def decode_image(source: Path, roots: Sequence[Path], max_pixels: int) -> NDArray[np.uint8] | str:
    """The image as BGR pixels, or why it cannot be read. Decoding here, one image at a time, keeps
    one bad file from failing the whole job (ultralytics raises for the batch). Its header is read
    first: an image of more than `max_pixels` is never decoded."""
    import cv2
    import numpy as np

    try:
        with open_contained(source, roots) as file:  # the header is read from what was checked
            refused = images.decode_refusal(file, max_pixels)
            if refused is not None:
                return refused
            data = np.frombuffer(file.read(), dtype=np.uint8)
    except InvalidJobInput as e:
        return e.message
    except OSError as e:
        return f"cannot read the file: {e.strerror or e}"
    image = cv2.imdecode(data, cv2.IMREAD_COLOR) if data.size else None
    if image is None:
        return "cannot decode the file as an image"
    return image  # type: ignore[return-value]  # cv2 types pixels as MatLike
