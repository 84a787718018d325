"""The demo's generated dataset: what ultralytics and the server read, the same for a seed."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from PIL import Image

from yolo_orch.demo.dataset import CLASS_NAMES, SPLITS, DatasetSpec, make_dataset

SPEC = DatasetSpec(train=30, val=9, test=6, size=64, seed=7)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_dataset(tmp_path_factory.mktemp("demo") / "dataset", SPEC).parent


def _labels(root: Path, split: str) -> list[list[float]]:
    return [
        [float(value) for value in line.split()]
        for path in sorted((root / "labels" / split).glob("*.txt"))
        for line in path.read_text().splitlines()
    ]


def test_every_split_has_its_images_and_a_label_file_each(dataset: Path) -> None:
    for split in SPLITS:
        images = sorted(path.stem for path in (dataset / "images" / split).glob("*.png"))
        labels = sorted(path.stem for path in (dataset / "labels" / split).glob("*.txt"))
        assert len(images) == SPEC.count(split)
        assert images == labels


def test_images_are_readable_rgb_of_the_spec_size(dataset: Path) -> None:
    for path in (dataset / "images" / "val").glob("*.png"):
        with Image.open(path) as image:
            image.load()
            assert image.mode == "RGB"
            assert image.size == (SPEC.size, SPEC.size)


@pytest.mark.parametrize("split", SPLITS)
def test_labels_are_known_classes_with_boxes_inside_the_image(dataset: Path, split: str) -> None:
    rows = _labels(dataset, split)
    assert rows
    for class_id, cx, cy, w, h in rows:
        assert class_id in range(len(CLASS_NAMES))
        low, high = SPEC.object_fraction
        assert low - 1e-6 <= w <= high + 1e-6
        assert h == pytest.approx(w)
        assert cx - w / 2 >= 0
        assert cx + w / 2 <= 1
        assert cy - h / 2 >= 0
        assert cy + h / 2 <= 1


def test_classes_are_balanced_in_every_split(dataset: Path) -> None:
    for split in SPLITS:
        counts = Counter(int(row[0]) for row in _labels(dataset, split))
        assert set(counts) == set(range(len(CLASS_NAMES)))
        assert max(counts.values()) - min(counts.values()) <= 1, (split, counts)


def test_images_hold_several_objects(dataset: Path) -> None:
    per_image = [
        len(path.read_text().splitlines()) for path in (dataset / "labels" / "train").glob("*.txt")
    ]
    assert min(per_image) >= 1
    assert sum(per_image) / len(per_image) >= SPEC.objects[0]


def test_data_yaml_names_the_splits_and_classes(dataset: Path) -> None:
    data = json.loads((dataset / "data.yaml").read_text())  # JSON is the YAML it is written as
    assert data == {
        "train": "images/train",
        "val": "images/val",
        "test": "images/test",
        "names": list(CLASS_NAMES),
    }


def test_a_seed_gives_the_same_files_and_another_seed_others(dataset: Path, tmp_path: Path) -> None:
    again = make_dataset(tmp_path / "again", SPEC).parent
    other = make_dataset(tmp_path / "other", DatasetSpec(train=30, val=9, test=6, size=64)).parent
    files = sorted(path.relative_to(dataset) for path in dataset.rglob("*") if path.is_file())
    assert files == sorted(path.relative_to(again) for path in again.rglob("*") if path.is_file())
    for relative in files:
        assert (dataset / relative).read_bytes() == (again / relative).read_bytes(), relative
    label = Path("labels/train/train_0000.txt")
    image = Path("images/train/train_0000.png")
    assert (dataset / label).read_bytes() != (other / label).read_bytes()
    assert (dataset / image).read_bytes() != (other / image).read_bytes()


def test_the_server_accepts_it_as_a_detection_dataset(dataset: Path) -> None:
    from yolo_orch.files.datasets import load_dataset

    checked = load_dataset(dataset / "data.yaml", [dataset.parent])
    assert checked.names == CLASS_NAMES
    assert set(checked.splits) == set(SPLITS)
