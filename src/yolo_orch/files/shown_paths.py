"""How a message that reaches a client names the server's files: by their path under the folder
they are in (a data root, a model root, data_dir), never by the server's absolute path.

What a library raises (ultralytics, torch, ONNX Runtime, OpenVINO, the OS) names files by the
paths the server handed it, and a client has no business knowing where the server keeps its
folders. `ShownPaths.text` rewrites such a message: a path under a known folder becomes its path
under that folder (behind the folder's label, where it has one), any other absolute path its last
part behind "…/".
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

__all__ = ["ShownPaths"]

_STARTS_A_PATH = r"(?<![\w.~/-])"
"""Not inside a longer path, a word or a URL's `//`."""
_ENDS_A_NAME = r"(?=[\s'\"`),:;\]>}]|$)"
"""Where a folder's path ends: a known folder `/srv/data` is not the start of `/srv/data2`."""
_UNKNOWN = re.compile(_STARTS_A_PATH + r"/(?:[^\s'\"`/]+/)+([^\s'\"`/]+)")
"""An absolute path of two parts or more; its last part is kept."""


class ShownPaths:
    """`roots`: folders whose files are named by their paths inside them (a data root's
    `ds/images/val`); `named`: folders or files shown under a name of their own (a staged upload
    under the name its client gave it, `data_dir/jobs` as `jobs`). Each is known by its path as
    given and by its real path, as a library that resolved links would write it."""

    def __init__(self, roots: Iterable[Path] = (), named: Mapping[Path, str] | None = None) -> None:
        labels: dict[str, str] = {}
        for path, label in [*((root, "") for root in roots), *(named or {}).items()]:
            for form in (str(path), os.path.realpath(path)):
                if os.path.isabs(form) and form != "/":
                    labels.setdefault(form.rstrip("/"), label)
        self._labels = labels
        # Longest first: a folder inside another (data_dir under a data root) names its files.
        known = sorted(labels, key=len, reverse=True)
        self._known = (
            re.compile(f"{_STARTS_A_PATH}({'|'.join(map(re.escape, known))})(/|{_ENDS_A_NAME})")
            if known
            else None
        )

    def text(self, message: str) -> str:
        """`message` with every absolute path it holds shown as a client may see it."""
        if self._known is not None:
            message = self._known.sub(self._under_folder, message)
        return _UNKNOWN.sub(lambda found: f"…/{found[1]}", message)

    def _under_folder(self, found: re.Match[str]) -> str:
        label = self._labels[found[1]]
        if found[2] == "/":
            return f"{label}/" if label else ""
        return label or "."
