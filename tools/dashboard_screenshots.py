"""The dashboard screenshots in docs/images/, made by the dashboard's own tests.

The Playwright tests (tests/acceptance/test_dashboard*.py) draw every view against a real
server with real jobs and save each at two widths in test-artifacts/. This runs them and copies
the desktop-width screenshot of each view docs/dashboard.md shows (in 256 colours), so the
pictures there are of the dashboard as it is, never drawn by hand:

    python tools/dashboard_screenshots.py            # runs the tests, then copies
    python tools/dashboard_screenshots.py --no-run   # copies what the last run left

Exits 1 if a view has no screenshot (its test did not run, or no longer takes it).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from PIL import Image

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "test-artifacts"
IMAGES = REPO / "docs" / "images"
TESTS = sorted(str(path) for path in (REPO / "tests" / "acceptance").glob("test_dashboard*.py"))
WIDTH = "desktop"


def shown_views() -> list[str]:
    """The views docs/dashboard.md shows: `images/dashboard-<view>.png` in its text."""
    text = (REPO / "docs" / "dashboard.md").read_text()
    views = []
    for part in text.split("images/dashboard-")[1:]:
        view, dot, _ = part.partition(".png")
        if dot and view not in views:
            views.append(view)
    return views


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-run", action="store_true", help="copy what the last run left")
    args = parser.parse_args()
    if not args.no_run:
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", *TESTS], cwd=REPO, check=False)
        if run.returncode != 0:
            print("the dashboard tests failed: no screenshot copied", file=sys.stderr)
            return 1
    IMAGES.mkdir(parents=True, exist_ok=True)
    missing = []
    for view in shown_views():
        made = ARTIFACTS / f"dashboard-{view}-{WIDTH}.png"
        if not made.exists():
            missing.append(view)
            continue
        # 256 colours: a third of the bytes, and a page of flat colours looks the same.
        picture = Image.open(made).convert("RGB").quantize(256, Image.Quantize.MEDIANCUT)
        picture.save(IMAGES / f"dashboard-{view}.png", optimize=True)
        print(f"docs/images/dashboard-{view}.png")
    if missing:
        print(f"no screenshot of: {', '.join(missing)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
