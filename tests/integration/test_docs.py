"""The documentation stays true: docs/configuration.md is what `yolo_orch.config.reference`
renders from the settings model now, and every relative link in README.md, BENCHMARKS.md and
docs/*.md points to a file that exists (and, for `#anchor` links, to a heading in it)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from yolo_orch.config import Settings
from yolo_orch.config.reference import render

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", ROOT / "BENCHMARKS.md", *(ROOT / "docs").glob("*.md")])
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)


def test_the_configuration_reference_is_current() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text()
    assert page == render(), (
        "docs/configuration.md is out of date: run `make docs` "
        "(python -m yolo_orch.config.reference > docs/configuration.md)"
    )


def test_the_configuration_reference_names_every_setting_and_its_variable() -> None:
    page = render()
    for name in Settings.model_fields:
        assert f"| `{name}` |" in page
        assert f"`YOLO_ORCH_{name.upper()}`" in page


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces to -."""
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    for line in FENCE.sub("", page.read_text()).splitlines():
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        slug = re.sub(r"[^\w\- ]", "", match.group(1).lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def _links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text())
    return [
        target
        for target in LINK.findall(text)
        if not re.match(r"^[a-z][a-z0-9+.-]*:", target)  # http:, https:, mailto:
    ]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_relative_links_point_to_files_and_headings_that_exist(page: Path) -> None:
    broken = []
    for target in _links(page):
        path_part, _, anchor = target.partition("#")
        target_path = (page.parent / path_part).resolve() if path_part else page
        if not target_path.exists():
            broken.append(f"{target} (no such file)")
            continue
        if anchor and target_path.suffix == ".md" and anchor not in _anchors(target_path):
            broken.append(f"{target} (no heading #{anchor})")
    assert not broken, f"{page.relative_to(ROOT)}: " + ", ".join(broken)
