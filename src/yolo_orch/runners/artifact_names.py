"""The names of an inference job's artifacts: `{index:05d}_{stem}{suffix}`, the input's stem cut
so that every name the runners write fits in one file name (NAME_MAX, 255 bytes), also in its
temporary forms.

A stem of up to `STEM_MAX_BYTES` bytes (UTF-8, as the file system stores it) is kept whole, as
it always was; a longer one is cut to that many bytes at a character boundary. The cut is
deterministic, and names stay distinct within a job: the index prefix differs from input to
input, and whatever follows the stem (a video frame's `_f{frame:06d}`, the suffix) is never cut.

The longest name written is a semantic video frame's map while it is written,
`.{index:05d}_{stem}_f{frame:06d}_classes.png.tmp`: 31 bytes besides the stem, so with the stem
at `STEM_MAX_BYTES` there is room for 24 more digits of index and frame number than the five and
six of the format.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

__all__ = ["NAME_MAX", "STEM_MAX_BYTES", "artifact_name", "artifact_stem", "input_stem"]

NAME_MAX = 255
"""The most bytes a file name may have (Linux, and most file systems)."""

STEM_MAX_BYTES = 200
"""The most bytes of an input's stem an artifact name keeps."""


_UNWRITABLE = re.compile(r"[\x00/\ud800-\udc7f\udd00-\udfff]")
"""What no file name can hold: NUL and `/`, and lone surrogates other than those Python decodes
a file name's non-UTF-8 bytes to (U+DC80..U+DCFF, written back as those bytes)."""


def input_stem(name: str) -> str:
    """The stem an input's artifacts are named after: that of the name the client gave it (an
    upload's file name, a path's last part), so that the artifacts of an uploaded `val0.jpg`
    are `00000_val0...` as those of a path `shots/val0.jpg` are, never those of the name the
    server stored the upload under. What a file name cannot hold becomes `_`."""
    return _UNWRITABLE.sub("_", PurePosixPath(name).stem)


def artifact_stem(stem: str) -> str:
    """`stem` whole when it has at most `STEM_MAX_BYTES` bytes, else its longest prefix of whole
    characters that does."""
    if _size(stem) <= STEM_MAX_BYTES:
        return stem
    size = 0
    for i, character in enumerate(stem):
        size += _size(character)
        if size > STEM_MAX_BYTES:
            return stem[:i]
    return stem  # not reached: the whole stem has more than STEM_MAX_BYTES bytes


def artifact_name(index: int, stem: str, suffix: str) -> str:
    """The artifact of the job's input at `index` (named `stem`): `suffix` after the index and the
    stem (cut by `artifact_stem`), kept whole."""
    return f"{index:05d}_{artifact_stem(stem)}{suffix}"


def _size(text: str) -> int:
    """Bytes of `text` in a file name: UTF-8, a byte that was not UTF-8 in the name it came from
    (decoded by Python as a lone surrogate) one byte again; any other lone surrogate counted at
    its three bytes of UTF-8, which is never less than what it could take."""
    try:
        return len(text.encode("utf-8", "surrogateescape"))
    except UnicodeEncodeError:
        return len(text.encode("utf-8", "surrogatepass"))
