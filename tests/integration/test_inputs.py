"""Client-named inputs resolve to files inside the data roots, and nothing else."""

from __future__ import annotations

import errno
import glob
import itertools
import os
import sys
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from yolo_orch.errors import InputWalkTooLarge, InvalidJob, InvalidPath, PathOutsideRoots
from yolo_orch.files.inputs import InputLimits, resolve_inputs


def limits(max_files: int = 10, entries: int = 10_000, timeout_s: float = 60.0) -> InputLimits:
    return InputLimits(max_files=max_files, max_walk_entries=entries, walk_timeout_s=timeout_s)


@pytest.fixture
def roots(tmp_path: Path) -> list[Path]:
    first, second = tmp_path / "data", tmp_path / "more"
    (first / "shots" / "day").mkdir(parents=True)
    second.mkdir()
    for name in ("shots/a.jpg", "shots/b.jpg", "shots/day/c.jpg", "shots/notes.txt"):
        (first / name).write_bytes(b"x")
    (second / "d.jpg").write_bytes(b"x")
    (tmp_path / "secret.jpg").write_bytes(b"x")
    return [first, second]


def names(paths: list[Path], roots: list[Path]) -> list[str]:
    result = []
    for path in paths:
        root = next(root for root in roots if path.is_relative_to(root.resolve()))
        result.append(str(path.relative_to(root.resolve())))
    return result


def test_plain_paths_and_globs(roots: list[Path]) -> None:
    found = resolve_inputs(["shots/b.jpg", "shots/*.jpg", "d.jpg"], roots, limits())
    assert names(found, roots) == ["shots/b.jpg", "shots/a.jpg", "d.jpg"]
    deep = resolve_inputs(["shots/**/*.jpg"], roots, limits())
    assert names(deep, roots) == ["shots/a.jpg", "shots/b.jpg", "shots/day/c.jpg"]


@pytest.mark.parametrize(
    "pattern",
    ["../secret.jpg", "shots/../../secret.jpg", "/etc/passwd", "~/x.jpg", "shots/a.jpg\x00.png"],
)
def test_escapes_are_refused(roots: list[Path], pattern: str) -> None:
    with pytest.raises(PathOutsideRoots):
        resolve_inputs([pattern], roots, limits())


def test_symlinks_out_of_the_root_are_refused(roots: list[Path], tmp_path: Path) -> None:
    os.symlink(tmp_path / "secret.jpg", roots[0] / "link.jpg")
    os.symlink(tmp_path, roots[0] / "outside")
    with pytest.raises(PathOutsideRoots):
        resolve_inputs(["link.jpg"], roots, limits())
    with pytest.raises(PathOutsideRoots):
        resolve_inputs(["*.jpg"], roots, limits())
    with pytest.raises(PathOutsideRoots):
        resolve_inputs(["outside/secret.jpg"], roots, limits())


def test_symlinks_within_the_root_are_fine(roots: list[Path]) -> None:
    os.symlink(roots[0] / "shots" / "a.jpg", roots[0] / "alias.jpg")
    assert names(resolve_inputs(["alias.jpg"], roots, limits()), roots) == ["shots/a.jpg"]


@pytest.mark.parametrize(
    ("patterns", "code"),
    [
        (["missing.jpg"], "input_not_found"),
        (["nothing/*.png"], "input_not_found"),
        (["shots"], "input_not_found"),
        (["shots/*"], "too_many_files"),
    ],
)
def test_unusable_inputs_are_refused(roots: list[Path], patterns: list[str], code: str) -> None:
    with pytest.raises(InvalidJob) as refused:
        resolve_inputs(patterns, roots, limits(max_files=2))
    assert refused.value.code == code


def test_without_roots_nothing_resolves() -> None:
    with pytest.raises(InvalidJob) as refused:
        resolve_inputs(["a.jpg"], [], limits(max_files=3))
    assert refused.value.code == "no_data_roots"


def test_a_glob_stops_walking_once_past_the_limit(tmp_path: Path) -> None:
    root = tmp_path / "huge"
    root.mkdir()
    for index in range(50):
        (root / f"{index:03d}.jpg").write_bytes(b"x")

    # 10 entries are enough to see 4 files (max_files + 1), not to read the 50 a full expansion
    # reads: the walk stopped at the fourth match, before the entry limit.
    with pytest.raises(InvalidJob) as refused:
        resolve_inputs(["**/*"], [root], limits(max_files=3, entries=10))
    assert refused.value.code == "too_many_files"
    # Within the limit the whole glob is read, sorted, as before.
    found = resolve_inputs(["*.jpg"], [root], limits(max_files=50, entries=50))
    assert [path.name for path in found] == [f"{index:03d}.jpg" for index in range(50)]


def test_symlinked_duplicates_do_not_stop_a_glob_short(tmp_path: Path) -> None:
    root = tmp_path / "data"
    root.mkdir()
    for name in ("a.jpg", "b.jpg", "c.jpg"):
        (root / name).write_bytes(b"x")
    (root / "a2.jpg").symlink_to(root / "a.jpg")  # two names, one file

    with pytest.raises(InvalidJob) as refused:
        resolve_inputs(["*.jpg"], [root], limits(max_files=2))
    assert refused.value.code == "too_many_files"
    assert len(resolve_inputs(["*.jpg"], [root], limits(max_files=3))) == 3


# --- the walk is bounded and loop-proof, and matches what glob would ---


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A tree without symlinks, hidden names included, to compare the walk with glob."""
    root = tmp_path / "tree"
    for name in (
        "a.jpg",
        "a.png",
        "b/c.jpg",
        "b/d/e.jpg",
        "b/d/f/g.jpg",
        "b.jpg",
        ".hidden/h.jpg",
        "b/.i.jpg",
        "j[1].jpg",
        "k/l/m.jpg",
    ):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(b"x")
    return root


@pytest.mark.parametrize(
    "pattern",
    [
        "*.jpg",
        "**/*.jpg",
        "b/**",
        "**",
        "**/d/*.jpg",
        "b/**/**/*.jpg",
        "?/*.jpg",
        "[ab].*",
        "j[[]1].jpg",
        ".*/*.jpg",
        "**/.*.jpg",
        "*/d/*/g.jpg",
        "k/*/m.jpg",
        "b/d/../c.jpg",
    ],
)
def test_the_walk_matches_what_glob_matches(tree: Path, pattern: str) -> None:
    def key(name: str) -> tuple[str, ...]:
        return PurePosixPath(name).parts

    matches = glob.glob(pattern, root_dir=tree, recursive=True)  # "**/**" repeats names
    expected = sorted({m for m in matches if (tree / m).is_file()}, key=key)
    if ".." in pattern:
        with pytest.raises(PathOutsideRoots):
            resolve_inputs([pattern], [tree], limits())
        return
    if not expected:
        with pytest.raises(InvalidJob, match="matches no file"):
            resolve_inputs([pattern], [tree], limits())
        return
    found = resolve_inputs([pattern], [tree], limits())
    assert [str(path.relative_to(tree)) for path in found] == [
        str(PurePosixPath(name)) for name in expected
    ]


def test_a_symlink_loop_is_walked_once(tmp_path: Path) -> None:
    root = tmp_path / "data"
    (root / "loop" / "sub").mkdir(parents=True)
    (root / "loop" / "a.jpg").write_bytes(b"x")
    (root / "loop" / "sub" / "b.jpg").write_bytes(b"x")
    (root / "loop" / "self").symlink_to(root / "loop")  # loop/self/self/... for ever, to glob
    (root / "loop" / "sub" / "up").symlink_to("..")
    (root / "loop" / "also").symlink_to("sub")  # a second name for one folder

    found = resolve_inputs(["loop/**/*.jpg"], [root], limits())

    real = root.resolve()
    assert found == [real / "loop" / "a.jpg", real / "loop" / "sub" / "b.jpg"]


def test_a_walk_over_its_entry_limit_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "data"
    for index in range(30):
        (root / f"d{index}").mkdir(parents=True)
        (root / f"d{index}" / "x.txt").write_bytes(b"x")

    with pytest.raises(InputWalkTooLarge) as refused:
        resolve_inputs(["**/*.jpg"], [root], limits(entries=40))
    assert refused.value.code == "input_walk_too_large"
    assert "max_walk_entries" in refused.value.message
    # The budget is for the whole submission, not per pattern.
    plain = [f"d{i}/x.txt" for i in range(30)]
    with pytest.raises(InputWalkTooLarge):
        resolve_inputs(plain, [root], limits(max_files=30, entries=20))
    assert len(resolve_inputs(plain, [root], limits(max_files=30, entries=30))) == 30


def test_a_walk_past_its_deadline_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "data"
    for index in range(30):
        (root / f"d{index}").mkdir(parents=True)
    ticks = itertools.count()  # a clock that advances 1 s each time it is read

    with pytest.raises(InputWalkTooLarge) as refused:
        resolve_inputs(
            ["**/*.jpg"], [root], limits(timeout_s=10.0), clock=lambda: float(next(ticks))
        )
    assert "input_walk_timeout_s" in refused.value.message
    assert next(ticks) < 15  # it stopped at the deadline, not at the end of the walk


def test_a_deep_tree_does_not_reach_the_recursion_limit(tmp_path: Path) -> None:
    root = tmp_path / "data"
    deep = root.joinpath(*["d"] * 300)
    deep.mkdir(parents=True)
    (deep / "x.jpg").write_bytes(b"x")
    limit = sys.getrecursionlimit()
    # A tree deeper than the limit allows would outlive the test: pytest's own clean-up recurses.
    sys.setrecursionlimit(200)
    try:
        found = resolve_inputs(["**/*.jpg"], [root], limits())
    finally:
        sys.setrecursionlimit(limit)

    assert found == [deep.resolve() / "x.jpg"]


def test_a_glob_does_not_walk_into_a_folder_outside_the_roots(
    roots: list[Path], tmp_path: Path
) -> None:
    os.symlink(tmp_path, roots[0] / "shots" / "day" / "up")  # tmp_path holds the root itself

    with pytest.raises(PathOutsideRoots):
        resolve_inputs(["shots/**/*.jpg"], roots, limits())


# --- file-system errors are the client's errors, with a code ---


@pytest.mark.parametrize(
    ("pattern", "code"),
    [
        ("x" * 300 + ".jpg", "path_too_long"),
        ("shots/" + "x" * 300 + "/*.jpg", "path_too_long"),
        ("/".join(["shots"] + ["y" * 250] * 20) + "/a.jpg", "path_too_long"),
        ("self.jpg", "path_symlink_loop"),
        ("self.jpg/a.jpg", "path_symlink_loop"),
        ("shots/a.jpg/b.jpg", "path_not_a_directory"),
    ],
)
def test_file_system_errors_are_invalid_paths(roots: list[Path], pattern: str, code: str) -> None:
    (roots[0] / "self.jpg").symlink_to("self.jpg")

    with pytest.raises(InvalidPath) as refused:
        resolve_inputs([pattern], roots, limits())

    assert refused.value.code == code
    assert len(refused.value.message) < 400  # the name is shown, shortened


def test_a_folder_that_cannot_be_read_is_an_invalid_path(
    roots: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    locked = roots[0] / "shots" / "day"
    locked.chmod(0)
    try:
        if os.access(locked, os.R_OK):  # root reads it anyway: make the listing fail as it would
            real_scandir = os.scandir

            def scandir(path: str) -> Any:
                if Path(path) == locked.resolve():
                    raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)
                return real_scandir(path)

            monkeypatch.setattr(os, "scandir", scandir)
        with pytest.raises(InvalidPath) as refused:
            resolve_inputs(["shots/**/*.jpg"], roots, limits())
    finally:
        locked.chmod(0o755)
    assert refused.value.code == "path_permission_denied"
    assert "'shots/day'" in refused.value.message


def test_a_looping_or_dangling_link_is_not_a_match_of_a_glob(roots: list[Path]) -> None:
    (roots[0] / "shots" / "self.jpg").symlink_to("self.jpg")
    (roots[0] / "shots" / "gone.jpg").symlink_to("nothing-here.jpg")

    found = resolve_inputs(["shots/*.jpg"], roots, limits())

    assert names(found, roots) == ["shots/a.jpg", "shots/b.jpg"]
