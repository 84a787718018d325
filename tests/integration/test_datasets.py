"""`check_dataset`: a client's data.yaml is checked before ultralytics can act on it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from yolo_orch.errors import InvalidJob, PathOutsideRoots
from yolo_orch.files.datasets import check_dataset, load_dataset


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    for split in ("train", "val"):
        (root / "ds" / "images" / split).mkdir(parents=True)
    return root


def write(root: Path, data: object, name: str = "ds/data.yaml") -> str:
    (root / name).write_text(yaml.safe_dump(data))
    return name


VALID = {"path": ".", "train": "images/train", "val": "images/val", "names": ["cat", "dog"]}


def test_a_valid_dataset_resolves_to_absolute_paths_inside_the_root(root: Path) -> None:
    relative = write(root, {**VALID, "roboflow": {"url": "ignored"}})

    path = check_dataset(relative, [root])

    assert path == (root / "ds" / "data.yaml").resolve()
    data = load_dataset(path, [root]).for_ultralytics()
    assert data == {
        "path": str((root / "ds").resolve()),
        "names": {0: "cat", 1: "dog"},
        "nc": 2,
        "channels": 3,
        "train": [str((root / "ds/images/train").resolve())],
        "val": [str((root / "ds/images/val").resolve())],
    }


def test_names_as_a_mapping_and_path_defaulting_to_the_yaml_folder(root: Path) -> None:
    data = {"train": "images/train", "val": ["images/val"], "names": {1: "dog", 0: "cat"}}
    path = check_dataset(write(root, data), [root])

    assert load_dataset(path, [root]).names == ("cat", "dog")


def test_a_download_key_is_refused_and_never_runs(root: Path, tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    script = f"open({str(canary)!r}, 'w').write('ran')"
    # The val folder is missing: exactly when ultralytics would run `download`.
    data = {**VALID, "val": "images/missing", "download": script}

    with pytest.raises(InvalidJob) as caught:
        check_dataset(write(root, data), [root])

    assert caught.value.code == "unsafe_dataset"
    assert not canary.exists()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("path", "../.."),
        ("path", "/"),
        ("train", "../../outside"),
        ("val", "/etc"),
        ("path", "a\x00b"),  # no file has such a name; os.path would raise ValueError
        ("train", "images/tr\x00ain"),
    ],
)
def test_paths_that_leave_the_roots_are_refused(
    root: Path, tmp_path: Path, field: str, value: str
) -> None:
    (tmp_path / "outside").mkdir()

    with pytest.raises(PathOutsideRoots):
        check_dataset(write(root, {**VALID, field: value}), [root])


def test_the_yaml_name_itself_must_stay_inside(root: Path) -> None:
    with pytest.raises(PathOutsideRoots):
        check_dataset("../data/ds/data.yaml", [root])
    with pytest.raises(PathOutsideRoots):
        check_dataset("/etc/passwd", [root])


def test_a_symlink_out_of_the_roots_is_refused(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (outside / "images").mkdir(parents=True)
    os.symlink(outside / "images", root / "ds" / "linked")
    os.symlink(tmp_path / "elsewhere.yaml", root / "ds" / "link.yaml")
    (tmp_path / "elsewhere.yaml").write_text(yaml.safe_dump(VALID))

    with pytest.raises(PathOutsideRoots):
        check_dataset(write(root, {**VALID, "train": "linked"}), [root])
    with pytest.raises(PathOutsideRoots):
        check_dataset("ds/link.yaml", [root])


def test_an_image_list_may_not_name_files_outside(root: Path) -> None:
    (root / "ds" / "train.txt").write_text("./images/train/a.jpg\n/etc/passwd\n")

    with pytest.raises(PathOutsideRoots):
        check_dataset(write(root, {**VALID, "train": "train.txt"}), [root])

    (root / "ds" / "train.txt").write_text("images/train/a.jpg\n")  # relative to the server's cwd
    with pytest.raises(InvalidJob) as caught:
        check_dataset(write(root, {**VALID, "train": "train.txt"}), [root])
    assert caught.value.code == "invalid_dataset"


@pytest.mark.parametrize(
    "data",
    [
        {k: v for k, v in VALID.items() if k != "names"},
        {**VALID, "names": []},
        {**VALID, "names": {0: "a", 2: "b"}},
        {**VALID, "nc": 3},
        {k: v for k, v in VALID.items() if k != "val"},
        {**VALID, "train": 5},
        {**VALID, "channels": 4},
        ["not", "a", "mapping"],
    ],
)
def test_malformed_datasets_are_invalid(root: Path, data: object) -> None:
    with pytest.raises(InvalidJob) as caught:
        check_dataset(write(root, data), [root])

    assert caught.value.code == "invalid_dataset"


def test_not_yaml_is_invalid(root: Path) -> None:
    (root / "ds" / "data.yaml").write_text("names: [unclosed\n  : : :")

    with pytest.raises(InvalidJob) as caught:
        check_dataset("ds/data.yaml", [root])

    assert caught.value.code == "invalid_dataset"


def test_missing_files_and_folders_are_not_found(root: Path) -> None:
    with pytest.raises(InvalidJob) as caught:
        check_dataset("ds/nothing.yaml", [root])
    assert caught.value.code == "dataset_not_found"

    with pytest.raises(InvalidJob) as caught:
        check_dataset(write(root, {**VALID, "val": "images/missing"}), [root])
    assert caught.value.code == "dataset_not_found"
