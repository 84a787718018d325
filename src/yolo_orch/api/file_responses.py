"""Files sent as they are (artifacts, uploaded inputs, a result served from its file), with
byte ranges read as RFC 9110 §14 says: a `Range` header of another unit, or that is invalid,
is ignored (200, the whole file); one none of whose ranges overlaps the file is a 416 problem
with `Content-Range: bytes */<size>`. Starlette's `FileResponse` would answer both itself, in
plain text (400 and 416), and reads digits as `int()` does (other scripts' digits, `1_0`)."""

from __future__ import annotations

import re
from typing import Any

from fastapi.responses import FileResponse
from starlette.types import Receive, Scope, Send

from yolo_orch.api.problems import error_response, problem_responses
from yolo_orch.errors import RangeNotSatisfiable

_INT_RANGE = re.compile(r"([0-9]+)-([0-9]*)")
_SUFFIX_RANGE = re.compile(r"-([0-9]+)")
_HUGE = 1 << 64
"""Stands for any position past what a file can hold (longer digit strings are not parsed)."""
_SHOWN = 200
"""How much of a refused header the problem's detail repeats."""

RANGE_RESPONSES: dict[int | str, dict[str, Any]] = {
    206: {
        "description": "Partial Content: the byte range asked for with `Range` (RFC 9110), or "
        "`multipart/byteranges` for several. A `Range` of another unit than `bytes`, or "
        "that is invalid, is ignored: 200 with the whole file.",
        "headers": {
            "Content-Range": {
                "description": "`bytes <first>-<last>/<size>` (a single range).",
                "schema": {"type": "string"},
            }
        },
    },
    416: {
        **problem_responses(416)[416],
        "headers": {
            "Content-Range": {
                "description": "`bytes */<size>`: the file's size.",
                "schema": {"type": "string"},
            }
        },
    },
}
"""The answers to a `Range` request a route serving a file documents (416:
`range_not_satisfiable`, when no range asked for overlaps the file)."""


class RangedFileResponse(FileResponse):
    """A `FileResponse` whose `Range` handling follows RFC 9110 and whose 416 is problem
    JSON. Valid ranges are served as Starlette serves them (206, one part or several)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        except RangeNotSatisfiable as exc:  # raised as the range is read, before anything is sent
            await error_response(exc)(scope, receive, send)

    @classmethod
    def _parse_range_header(cls, http_range: str, file_size: int) -> list[tuple[int, int]]:
        """The `(start, end)` byte spans to send, end exclusive; [] to send the whole file."""
        unit, equals, range_set = http_range.partition("=")
        if not equals or unit.strip().lower() != "bytes":
            return []  # a unit this server does not know: ignored (RFC 9110 §14.2)
        specs = [spec.strip() for spec in range_set.split(",")]
        specs = [spec for spec in specs if spec]  # empty list elements are allowed (§5.6.1)
        if not specs or len(specs) > cls.max_ranges:
            return []
        ranges: list[tuple[int, int]] = []
        whole = False
        for spec in specs:
            if (bounded := _INT_RANGE.fullmatch(spec)) is not None:
                first = _position(bounded[1])
                last = _position(bounded[2]) if bounded[2] else None
                if last is not None and last < first:
                    return []  # invalid: the whole header is ignored
                if first < file_size:
                    end = file_size if last is None else min(last + 1, file_size)
                    ranges.append((first, end))
            elif (suffix := _SUFFIX_RANGE.fullmatch(spec)) is not None:
                length = _position(suffix[1])
                if length > 0 and file_size == 0:
                    whole = True  # satisfiable, but there is nothing to cut: send it whole
                elif length > 0:
                    ranges.append((max(file_size - length, 0), file_size))
            else:
                return []  # not a byte range: the whole header is ignored
        if not ranges:
            if whole:
                return []
            shown = http_range if len(http_range) <= _SHOWN else http_range[:_SHOWN] + "..."
            raise RangeNotSatisfiable(shown, file_size)
        if len(ranges) == 1:
            return ranges
        ranges.sort()  # overlapping or adjacent ranges are sent as one, as Starlette does
        merged = [ranges[0]]
        for start, end in ranges[1:]:
            last_start, last_end = merged[-1]
            if start <= last_end:
                merged[-1] = (last_start, max(last_end, end))
            else:
                merged.append((start, end))
        return merged


def _position(digits: str) -> int:
    """ASCII digits as a byte position; past 19 significant digits, `_HUGE` (Python refuses to
    read very long digit strings)."""
    significant = digits.lstrip("0") or "0"
    return int(significant) if len(significant) <= 19 else _HUGE
