"""Image headers are read before anything decodes an image: too many pixels is refused."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
from PIL import Image

from tests.hostile import png_bomb
from yolo_orch.errors import InvalidJob
from yolo_orch.files import images
from yolo_orch.files.images import (
    UNDECODABLE,
    limit_decoders,
    pixel_refusal,
    refuse_oversized,
)
from yolo_orch.runners.decode import decode_image


def decode_refusal(path: Path, max_pixels: int) -> str | None:
    """`images.decode_refusal` of the file at `path`, opened here."""
    with path.open("rb") as file:
        refused = images.decode_refusal(file, max_pixels)
        assert file.tell() == 0  # left at its start for the reader
        return refused


@pytest.fixture(autouse=True)
def pillow_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pillow's limit is process-wide: each test sets its own and gets the old one back."""
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", Image.MAX_IMAGE_PIXELS)


@pytest.fixture
def photo(tmp_path: Path) -> Path:
    path = tmp_path / "photo.jpg"
    cv2.imwrite(str(path), np.full((200, 300, 3), 127, dtype=np.uint8))
    return path


def test_an_image_within_the_limit_may_be_decoded(photo: Path) -> None:
    assert decode_refusal(photo, 60_000) is None
    assert pixel_refusal(photo, 60_000) is None


def test_one_pixel_over_the_limit_is_refused_with_its_size(photo: Path) -> None:
    refused = decode_refusal(photo, 59_999)

    assert refused == (
        "the image is 300x200 pixels (60000); this server decodes at most 59999 (max_image_pixels)"
    )
    assert pixel_refusal(photo, 59_999) == refused


def test_a_png_bomb_is_refused_from_its_header(tmp_path: Path) -> None:
    limit_decoders(50_000_000)
    bomb = png_bomb(tmp_path / "bomb.png", 30_000, 30_000)
    assert bomb.stat().st_size < 200_000  # 2.7 GB once decoded

    refused = decode_refusal(bomb, 50_000_000)

    assert refused is not None
    assert "max_image_pixels" in refused


def test_between_pillows_own_limit_and_twice_it_the_size_is_still_read(tmp_path: Path) -> None:
    limit_decoders(1_000)  # Pillow warns past 1000 pixels and refuses past 2000
    image = png_bomb(tmp_path / "wide.png", 50, 30)

    assert decode_refusal(image, 2_000) is None
    assert decode_refusal(image, 1_499) == (
        "the image is 50x30 pixels (1500); this server decodes at most 1499 (max_image_pixels)"
    )


def test_a_file_that_is_no_image_is_not_decoded(tmp_path: Path) -> None:
    junk = tmp_path / "junk.jpg"
    junk.write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")

    assert decode_refusal(junk, 50_000_000) == UNDECODABLE
    assert pixel_refusal(junk, 50_000_000) is None  # the decoder will say what is wrong


def test_a_missing_file_cannot_be_read(tmp_path: Path) -> None:
    refused = decode_image(tmp_path / "gone.jpg", [tmp_path], 50_000_000)

    assert isinstance(refused, str)
    assert refused.startswith("cannot read the file")
    assert pixel_refusal(tmp_path / "gone.jpg", 50_000_000) is None


def test_uploads_over_the_limit_are_refused_by_name(photo: Path, tmp_path: Path) -> None:
    bomb = png_bomb(tmp_path / "00001.png", 30_000, 30_000)
    files = [{"path": str(photo), "name": "cat.jpg"}, {"path": str(bomb), "name": "big.png"}]

    refuse_oversized(files[:1], 50_000_000)
    with pytest.raises(InvalidJob) as caught:
        refuse_oversized(files, 50_000_000)

    assert caught.value.code == "image_too_large"
    assert caught.value.message.startswith("upload 'big.png': ")


def test_a_small_header_in_front_of_a_huge_file_is_not_read(photo: Path, tmp_path: Path) -> None:
    padded = tmp_path / "padded.jpg"
    padded.write_bytes(photo.read_bytes())
    with padded.open("r+b") as file:
        file.truncate(1 << 30)  # sparse: 1 GiB behind a 300x200 header

    refused = decode_refusal(padded, 50_000_000)

    assert refused == ("the file holds 1073741824 bytes, more than an image of 300x200 needs")
