"""Client-named inputs resolve to files inside the data roots, and nothing else."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from yolo_orch.errors import InvalidJob, PathOutsideRoots
from yolo_orch.inputs import resolve_inputs


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
    found = resolve_inputs(["shots/b.jpg", "shots/*.jpg", "d.jpg"], roots, max_files=10)
    assert names(found, roots) == ["shots/b.jpg", "shots/a.jpg", "d.jpg"]
    deep = resolve_inputs(["shots/**/*.jpg"], roots, max_files=10)
    assert names(deep, roots) == ["shots/a.jpg", "shots/b.jpg", "shots/day/c.jpg"]


@pytest.mark.parametrize(
    "pattern",
    ["../secret.jpg", "shots/../../secret.jpg", "/etc/passwd", "~/x.jpg", "shots/a.jpg\x00.png"],
)
def test_escapes_are_refused(roots: list[Path], pattern: str) -> None:
    with pytest.raises(PathOutsideRoots):
        resolve_inputs([pattern], roots, max_files=10)


def test_symlinks_out_of_the_root_are_refused(roots: list[Path], tmp_path: Path) -> None:
    os.symlink(tmp_path / "secret.jpg", roots[0] / "link.jpg")
    os.symlink(tmp_path, roots[0] / "outside")
    with pytest.raises(PathOutsideRoots):
        resolve_inputs(["link.jpg"], roots, max_files=10)
    with pytest.raises(PathOutsideRoots):
        resolve_inputs(["*.jpg"], roots, max_files=10)
    with pytest.raises(PathOutsideRoots):
        resolve_inputs(["outside/secret.jpg"], roots, max_files=10)


def test_symlinks_within_the_root_are_fine(roots: list[Path]) -> None:
    os.symlink(roots[0] / "shots" / "a.jpg", roots[0] / "alias.jpg")
    assert names(resolve_inputs(["alias.jpg"], roots, max_files=10), roots) == ["shots/a.jpg"]


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
        resolve_inputs(patterns, roots, max_files=2)
    assert refused.value.code == code


def test_without_roots_nothing_resolves() -> None:
    with pytest.raises(InvalidJob) as refused:
        resolve_inputs(["a.jpg"], [], max_files=3)
    assert refused.value.code == "no_data_roots"


def test_a_glob_stops_walking_once_past_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import glob as glob_module

    root = tmp_path / "huge"
    root.mkdir()
    for index in range(50):
        (root / f"{index:03d}.jpg").write_bytes(b"x")
    real_iglob = glob_module.iglob
    pulled: list[str] = []

    def counting_iglob(pattern: str, *, root_dir: Path, recursive: bool) -> Iterator[str]:
        for match in real_iglob(pattern, root_dir=root_dir, recursive=recursive):
            pulled.append(match)
            yield match

    monkeypatch.setattr(glob_module, "iglob", counting_iglob)

    with pytest.raises(InvalidJob) as refused:
        resolve_inputs(["**/*"], [root], max_files=3)

    assert refused.value.code == "too_many_files"
    assert len(pulled) == 4  # max_files + 1, not the 50 a full expansion walks
    # Within the limit the whole glob is read, sorted, as before.
    pulled.clear()
    found = resolve_inputs(["*.jpg"], [root], max_files=50)
    assert [path.name for path in found] == [f"{index:03d}.jpg" for index in range(50)]
    assert len(pulled) == 50


def test_symlinked_duplicates_do_not_stop_a_glob_short(tmp_path: Path) -> None:
    root = tmp_path / "data"
    root.mkdir()
    for name in ("a.jpg", "b.jpg", "c.jpg"):
        (root / name).write_bytes(b"x")
    (root / "a2.jpg").symlink_to(root / "a.jpg")  # two names, one file

    with pytest.raises(InvalidJob) as refused:
        resolve_inputs(["*.jpg"], [root], max_files=2)
    assert refused.value.code == "too_many_files"
    assert len(resolve_inputs(["*.jpg"], [root], max_files=3)) == 3
