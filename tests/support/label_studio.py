"""A real Label Studio for the tests that need one (`yolo_orch.testing.label_studio`): one per
session, started on first use; its venv is built into the user's cache the first time (about a
minute here), and each start takes about half a minute."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from yolo_orch.testing.label_studio import LabelStudio, running_label_studio


@pytest.fixture(scope="session")
def label_studio() -> Iterator[LabelStudio]:
    with running_label_studio() as studio:
        yield studio
