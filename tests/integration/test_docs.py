"""The documentation stays true: docs/configuration.md is what `yolo_orch.config.reference`
renders from the settings model now, docs/errors.md lists the codes of `ErrorCode`, and every
relative link in README.md, BENCHMARKS.md and docs/*.md points to a file that exists (and, for
`#anchor` links, to a heading in it)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from yolo_orch.config import Settings
from yolo_orch.config.reference import render
from yolo_orch.errors import ErrorCode

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


def _codes_named_in(page: Path) -> list[str]:
    """The codes of every table with a `codes` column: each lower-case name in backticks there,
    outside parentheses (which say more about a code, and may name headers and settings)."""
    codes: list[str] = []
    column: int | None = None
    for line in page.read_text().splitlines():
        if not line.startswith("|"):
            column = None
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if column is None:
            column = cells.index("codes") if "codes" in cells else -1
            continue
        if column < 0 or set(cells[column]) <= set("-: "):
            continue
        text = cells[column]
        while (outer := re.sub(r"\([^()]*\)", "", text)) != text:  # innermost first
            text = outer
        codes += re.findall(r"`([a-z][a-z0-9_]*)`", text)
    return codes


def test_the_error_page_lists_every_code_the_server_sends_and_no_other() -> None:
    named = _codes_named_in(ROOT / "docs" / "errors.md")  # a job failure may be a 4xx too
    missing = sorted(map(str, set(ErrorCode) - set(named)))
    unknown = sorted(set(named) - set(map(str, ErrorCode)))
    assert not missing, f"docs/errors.md does not list {missing}"
    assert not unknown, f"docs/errors.md lists {unknown}, which yolo_orch.errors.ErrorCode lacks"
