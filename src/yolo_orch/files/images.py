"""Image sizes read from headers, so nothing decodes an image with more pixels than the server
allows: a 2.6 MB PNG of zeros decodes to 30000 x 30000 pixels, 2.7 GB as BGR.

Pillow's `Image.open` reads the header only (pixels are read on `load()`). A file whose header
Pillow does not recognise is not decoded either: OpenCV reads formats Pillow does not (Radiance
HDR, OpenEXR) with a limit of its own of 2^30 pixels, as floats.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import BinaryIO

from yolo_orch.errors import ErrorCode, InvalidJob

__all__ = [
    "DEFAULT_MAX_IMAGE_PIXELS",
    "UNDECODABLE",
    "decode_refusal",
    "limit_decoders",
    "pixel_refusal",
    "refuse_oversized",
]

DEFAULT_MAX_IMAGE_PIXELS = 50_000_000
"""A 48 MP camera photo (8000 x 6000) fits: 144 MB as BGR."""
UNDECODABLE = "cannot decode the file as an image"
MAX_BYTES_PER_PIXEL = 8
"""The most any encoding stores per pixel uncompressed (16-bit RGBA), so a file larger than its
pixels need (plus `METADATA_SLACK`) carries something else: a valid small header in front of
gigabytes would otherwise be read whole into memory."""
METADATA_SLACK = 16 << 20
"""EXIF, ICC profiles, thumbnails."""


def limit_decoders(max_pixels: int) -> None:
    """Pillow's own decompression-bomb limit, for what decodes with Pillow in this process
    (ultralytics checks dataset images with it): it warns past `max_pixels` and refuses past
    twice that."""
    from PIL import Image

    Image.MAX_IMAGE_PIXELS = max_pixels


def pixel_refusal(path: Path, max_pixels: int) -> str | None:
    """Why the image at `path` must not be decoded, when its header says it has more than
    `max_pixels` pixels; None otherwise, also when no header can be read (the decoder then
    says what is wrong). Blocking."""
    try:
        with path.open("rb") as file:
            size = _header_size(file)
    except (OSError, _NoImageHeader):
        return None
    return _over(size, max_pixels)


def refuse_oversized(files: Iterable[Mapping[str, str]], max_pixels: int) -> None:
    """Refuse uploads (`{"path", "name"}`) whose header says they have more than `max_pixels`
    pixels (`InvalidJob` `image_too_large`). One whose header cannot be read is let through: it
    becomes an error entry when the job runs. Blocking."""
    for file in files:
        refused = pixel_refusal(Path(file["path"]), max_pixels)
        if refused is not None:
            raise InvalidJob(f"upload {file['name']!r}: {refused}", code=ErrorCode.IMAGE_TOO_LARGE)


def decode_refusal(file: BinaryIO, max_pixels: int) -> str | None:
    """Why the image in the open `file` must not be decoded: it cannot be read, has no image
    header that Pillow knows, or has more than `max_pixels` pixels; None when it may be. The
    file is read from its start and left there again: it is opened once, by whoever checked
    where it lies (a name opened again could since lead somewhere else). Blocking."""
    try:
        file.seek(0)
        try:
            size = _header_size(file)
        finally:
            file.seek(0)
        stored = os.fstat(file.fileno()).st_size
    except _NoImageHeader:
        return UNDECODABLE
    except OSError as e:
        return f"cannot read the file: {e.strerror or e}"
    if size is not None and stored > MAX_BYTES_PER_PIXEL * size[0] * size[1] + METADATA_SLACK:
        return f"the file holds {stored} bytes, more than an image of {size[0]}x{size[1]} needs"
    return _over(size, max_pixels)


class _NoImageHeader(Exception):
    pass


def _over(size: tuple[int, int] | None, max_pixels: int) -> str | None:
    if size is None:
        return (
            f"the image has more than {2 * _pillow_limit(max_pixels)} pixels; this server "
            f"decodes at most {max_pixels} (max_image_pixels)"
        )
    width, height = size
    if width * height <= max_pixels:
        return None
    return (
        f"the image is {width}x{height} pixels ({width * height}); this server decodes at most "
        f"{max_pixels} (max_image_pixels)"
    )


def _header_size(file: BinaryIO) -> tuple[int, int] | None:
    """(width, height) from the header; None when Pillow refused it as a decompression bomb
    (over twice its own limit, which `limit_decoders` sets). `_NoImageHeader` when no format
    reads the header."""
    from PIL import Image  # imported on first use: the settings import this module

    try:
        with warnings.catch_warnings():
            # Pillow warns past its own limit (the size is compared here instead), and about
            # formats it could not try.
            warnings.simplefilter("ignore")
            with Image.open(file) as image:
                return image.size
    except Image.DecompressionBombError:
        return None
    except Exception as e:  # bytes from a client: every way a header fails is no image
        raise _NoImageHeader(str(e)) from e


def _pillow_limit(max_pixels: int) -> int:
    from PIL import Image

    limit = Image.MAX_IMAGE_PIXELS
    return limit if limit is not None else max_pixels
