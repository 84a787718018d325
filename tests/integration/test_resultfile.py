"""Results: a small one encoded for the job's record; a larger one in a file written one entry a
line with an index, served whole or in pages from disk."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from yolo_orch.errors import ResultTooLarge
from yolo_orch.files.jobfiles import RESULT_FILE, RESULT_INDEX, JobFiles
from yolo_orch.files.resultfile import EntryPage, page_of


def entry(i: int) -> dict[str, Any]:
    return {
        "source": f"img-{i}.jpg\n",  # a newline in a value stays escaped: one entry a line
        "width": 640,
        "height": 480,
        "detections": [{"class_id": i, "confidence": 0.5}] * (i % 3),
    }


DETAIL = {"images": [entry(i) for i in range(7)]}


def on_disk(root: Path, max_result_bytes: int = 1 << 20) -> JobFiles:
    """Job files that keep every result in a file, however small."""
    return JobFiles(root, max_result_bytes, inline_result_bytes=0)


async def page_json(page: EntryPage, limit: int) -> dict[str, Any]:
    body = b"".join([chunk async for chunk in page.json(limit)])
    parsed: dict[str, Any] = json.loads(body)
    return parsed


def test_the_file_is_the_full_result_and_each_entry_a_line(tmp_path: Path) -> None:
    files = on_disk(tmp_path)
    files.write_result("j", DETAIL)

    text = files.result_path("j").read_text()

    assert json.loads(text) == DETAIL
    lines = text.splitlines()
    assert lines[0] == '{"images":['
    assert [json.loads(line.rstrip(",")) for line in lines[1:-1]] == DETAIL["images"]
    assert lines[-1] == "]}"


def test_other_keys_come_before_the_entries(tmp_path: Path) -> None:
    files = on_disk(tmp_path)
    detail = {"format": "pt", "images": [entry(1)]}

    files.write_result("j", detail)

    assert json.loads(files.result_path("j").read_bytes()) == detail


@pytest.mark.parametrize(("offset", "limit"), [(0, 3), (3, 3), (6, 3), (0, 100), (7, 3), (50, 1)])
async def test_pages_are_byte_ranges_found_through_the_index(
    tmp_path: Path, offset: int, limit: int
) -> None:
    files = on_disk(tmp_path)
    files.write_result("j", DETAIL)

    page = await page_json(files.result_page("j", offset, limit), limit)

    expected = DETAIL["images"][offset : offset + limit]
    assert page["images"] == expected
    assert (page["offset"], page["limit"], page["total"]) == (offset, limit, 7)
    end = offset + len(expected)
    assert page["next_offset"] == (end if end < 7 else None)


async def test_an_empty_result_has_an_empty_page(tmp_path: Path) -> None:
    files = on_disk(tmp_path)
    files.write_result("j", {"images": []})

    assert json.loads(files.result_path("j").read_bytes()) == {"images": []}
    page = await page_json(files.result_page("j", 0, 10), 10)
    assert (page["images"], page["total"], page["next_offset"]) == ([], 0, None)


async def test_a_result_without_entries_pages_as_empty(tmp_path: Path) -> None:
    files = on_disk(tmp_path)
    detail = {"epochs": 3, "metrics": {"mAP50": 0.5}, "model_id": "m"}
    files.write_result("j", detail)

    assert json.loads(files.result_path("j").read_bytes()) == detail
    assert not (tmp_path / "j" / RESULT_INDEX).exists()
    page = await page_json(files.result_page("j", 0, 10), 10)
    assert (page["images"], page["total"]) == ([], 0)


async def test_a_result_written_before_the_index_is_paged_by_parsing_it(tmp_path: Path) -> None:
    (tmp_path / "j").mkdir()
    (tmp_path / "j" / RESULT_FILE).write_text(json.dumps(DETAIL))

    page = await page_json(on_disk(tmp_path).result_page("j", 2, 2), 2)

    assert page["images"] == DETAIL["images"][2:4]
    assert (page["total"], page["next_offset"]) == (7, 4)


def test_a_result_past_the_limit_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    on_disk(tmp_path).write_result("measured", DETAIL)
    exact = (tmp_path / "measured" / RESULT_FILE).stat().st_size
    on_disk(tmp_path, max_result_bytes=exact).write_result("fits", DETAIL)

    with pytest.raises(ResultTooLarge) as caught:
        on_disk(tmp_path, max_result_bytes=exact - 1).write_result("big", DETAIL)

    assert caught.value.code == "result_too_large"
    assert list((tmp_path / "big").iterdir()) == []


def test_a_rewrite_replaces_an_earlier_attempts_index(tmp_path: Path) -> None:
    files = on_disk(tmp_path)
    files.write_result("j", DETAIL)

    files.write_result("j", {"images": [entry(9)]})

    assert files.result_page("j", 0, 10).total == 1


async def test_a_small_result_is_encoded_as_its_file_would_hold_it(tmp_path: Path) -> None:
    files = JobFiles(tmp_path)
    on_disk(tmp_path).write_result("j", DETAIL)

    small = files.small_result(DETAIL)

    assert small == files.result_path("j").read_bytes()
    assert small is not None
    page = await page_json(page_of(small, 5, 3), 3)
    assert page["images"] == DETAIL["images"][5:]
    assert (page["total"], page["next_offset"]) == (7, None)


def test_a_result_past_the_inline_size_needs_its_file(tmp_path: Path) -> None:
    size = len(JobFiles(tmp_path).small_result(DETAIL) or b"")

    assert JobFiles(tmp_path, inline_result_bytes=size).small_result(DETAIL) is not None
    assert JobFiles(tmp_path, inline_result_bytes=size - 1).small_result(DETAIL) is None
    assert JobFiles(tmp_path, inline_result_bytes=0).small_result({}) is None
