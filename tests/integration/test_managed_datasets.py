"""ManagedDatasets on disk: the layout each task gets, counts from the label files, items added
from threads while others read, deletion, what survives a restart, and refusals."""

from __future__ import annotations

import io
import threading
import zipfile
from pathlib import Path

import pytest

from yolo_orch.errors import (
    DatasetExists,
    DatasetItemNotFound,
    DatasetNotFound,
    InvalidDatasetItem,
    InvalidJob,
)
from yolo_orch.files.managed_dataset_zip import CHUNK_BYTES, zip_chunks
from yolo_orch.files.managed_datasets import ManagedDatasets
from yolo_orch.files.task_data import load_task_dataset

BOX = "0 0.5 0.5 0.2 0.2"
OTHER = "1 0.2 0.2 0.1 0.1"


@pytest.fixture
def datasets(tmp_path: Path) -> ManagedDatasets:
    return ManagedDatasets(tmp_path / "datasets")


def test_counts_per_split_class_and_source_follow_every_write(datasets: ManagedDatasets) -> None:
    datasets.create("cars", "detect", ["car", "bus"])
    first = datasets.add("cars", b"a", ".jpg", [BOX, BOX, OTHER], source="model", model_id="m")
    second = datasets.add("cars", b"b", "PNG", [OTHER], source="annotation", job_id="j")
    third = datasets.add("cars", b"c", ".jpg", [], source="model")  # a background image

    info = datasets.get("cars")
    assert (info.items, info.sources) == (3, {"model": 2, "annotation": 1})
    assert info.splits["train"].images == 2
    assert info.splits["train"].instances == {"car": 2, "bus": 1}
    assert info.splits["val"].instances == {"bus": 1}

    datasets.set_labels("cars", first, [OTHER], source="annotation")
    info = datasets.get("cars")
    assert info.splits["train"].instances == {"bus": 1}
    assert info.sources == {"model": 1, "annotation": 2}
    assert datasets.item_labels("cars", first) == [OTHER]
    assert datasets.item_labels("cars", third) == []
    assert datasets.item_image("cars", second).read_bytes() == b"b"
    assert datasets.item_image("cars", second).suffix == ".png"
    assert [i.id for i in datasets.items("cars", source="model")] == [third]
    assert [i.id for i in datasets.items("cars")] == [first, second, third]
    assert datasets.items("cars")[0].model_id == "m"


def test_what_is_on_disk_is_read_back_by_a_new_instance(
    datasets: ManagedDatasets, tmp_path: Path
) -> None:
    datasets.create("cars", "detect", ["car", "bus"], labelling={"model": "det@prod"})
    kept = [datasets.add("cars", b"x", ".jpg", [BOX], source="model") for _ in range(3)]
    datasets.update_labelling("cars", {"train_after": 10, "model": None})
    (tmp_path / "datasets" / "cars" / "images" / "train" / "999999-000000.jpg").write_bytes(b"")

    again = ManagedDatasets(tmp_path / "datasets")
    info = again.get("cars")
    assert info.labelling == {"train_after": 10}
    assert [i.id for i in again.items("cars")] == kept  # the file without a sidecar is none
    assert info.splits["train"].instances == {"car": 2}
    added = again.add("cars", b"y", ".jpg", [BOX], source="model")
    assert added.startswith("000003-")  # ids go on after the highest one found


def test_a_detection_dataset_is_what_training_reads(
    datasets: ManagedDatasets, tmp_path: Path
) -> None:
    datasets.create("people", "pose", ["person"], kpt_shape=(2, 3))
    line = "0 0.5 0.5 0.2 0.2 0.4 0.4 2 0.6 0.6 1"
    for _ in range(2):
        datasets.add("people", b"x", ".jpg", [line], source="model")
    found = load_task_dataset("pose", datasets.data_yaml("people"), [tmp_path])
    assert found.names == ("person",)
    with pytest.raises(InvalidJob) as refused:
        load_task_dataset("detect", datasets.data_yaml("people"), [tmp_path])
    assert refused.value.code == "task_mismatch"


def test_classify_keeps_each_image_in_its_class_folder(
    datasets: ManagedDatasets, tmp_path: Path
) -> None:
    datasets.create("pets", "classify", ["dog", "cat"])
    dog = datasets.add("pets", b"d", ".jpg", ["0"], source="model")
    cat = datasets.add("pets", b"c", ".jpg", ["1"], source="model")
    root = tmp_path / "datasets" / "pets"
    assert (root / "train" / "dog" / f"{dog}.jpg").read_bytes() == b"d"
    assert (root / "val" / "cat" / f"{cat}.jpg").is_file()
    assert datasets.data_yaml("pets") == root

    datasets.set_labels("pets", dog, ["1"], source="annotation")
    assert not (root / "train" / "dog" / f"{dog}.jpg").exists()
    assert datasets.item_image("pets", dog) == root / "train" / "cat" / f"{dog}.jpg"
    assert datasets.item_labels("pets", dog) == ["1"]
    info = ManagedDatasets(tmp_path / "datasets").get("pets")  # read back from the folders
    assert info.splits["train"].instances == {"cat": 1}
    assert info.splits["val"].instances == {"cat": 1}


def test_items_added_from_threads_are_all_kept_while_others_read(
    datasets: ManagedDatasets,
) -> None:
    datasets.create("cars", "detect", ["car"])
    writers, each = 8, 25
    ids: list[str] = []
    failures: list[BaseException] = []
    start = threading.Barrier(writers + 1)

    def write() -> None:
        start.wait()
        for _ in range(each):
            ids.append(datasets.add("cars", b"x", ".jpg", [BOX], source="model"))

    def read() -> None:
        start.wait()
        try:
            while len(ids) < writers * each:
                info = datasets.list()[0]
                assert info.items == sum(s.images for s in info.splits.values())
                assert len(datasets.items("cars")) <= writers * each
        except BaseException as e:
            failures.append(e)

    threads = [threading.Thread(target=write) for _ in range(writers)]
    reader = threading.Thread(target=read)
    for thread in [*threads, reader]:
        thread.start()
    for thread in [*threads, reader]:
        thread.join()
    assert failures == []
    assert len(set(ids)) == writers * each
    info = datasets.get("cars")
    assert info.items == writers * each
    assert info.splits["val"].images == writers * each // 5
    assert info.splits["train"].instances == {"car": writers * each * 4 // 5}


def test_deleting_removes_the_folder_and_the_name_is_free_again(
    datasets: ManagedDatasets, tmp_path: Path
) -> None:
    datasets.create("cars", "detect", ["car"])
    datasets.add("cars", b"x", ".jpg", [BOX], source="model")
    datasets.delete("cars")
    assert sorted(p.name for p in (tmp_path / "datasets").iterdir()) == []
    with pytest.raises(DatasetNotFound):
        datasets.get("cars")
    with pytest.raises(DatasetNotFound):
        datasets.add("cars", b"x", ".jpg", [BOX], source="model")
    assert datasets.create("cars", "segment", ["car"]).task == "segment"
    assert datasets.items("cars") == []


def test_refusals(datasets: ManagedDatasets) -> None:
    assert datasets.list() == []  # no folder yet
    datasets.create("cars", "detect", ["car"])
    with pytest.raises(DatasetExists):
        datasets.create("cars", "detect", ["car"])
    for name, task, names, shape in (
        ("Bad", "detect", ["a"], None),
        ("x", "depth", ["a"], None),
        ("x", "detect", [], None),
        ("x", "detect", ["a", "a"], None),
        ("x", "pose", ["a"], None),
        ("x", "detect", ["a"], (17, 3)),
        ("x", "pose", ["a"], (17, 4)),
        ("x", "classify", ["a/b"], None),
        ("x", "classify", [".hidden"], None),
    ):
        with pytest.raises(InvalidJob):
            datasets.create(name, task, names, kpt_shape=shape)
    with pytest.raises(InvalidDatasetItem, match="class id"):
        datasets.add("cars", b"x", ".jpg", ["1 0.5 0.5 0.2 0.2"], source="model")
    with pytest.raises(InvalidDatasetItem, match="stored as"):
        datasets.add("cars", b"x", ".html", [BOX], source="model")
    with pytest.raises(InvalidDatasetItem, match="empty"):
        datasets.add("cars", b"", ".jpg", [BOX], source="model")
    with pytest.raises(ValueError, match="source"):
        datasets.add("cars", b"x", ".jpg", [BOX], source="person")
    for item in ("000000-abcdef", "../../etc/passwd"):
        with pytest.raises(DatasetItemNotFound):
            datasets.item_image("cars", item)
    for name in ("nope", "../cars", ".", ""):
        with pytest.raises(DatasetNotFound):
            datasets.get(name)
    assert datasets.get("cars").items == 0


def test_the_zip_comes_in_chunks_and_leaves_out_what_is_gone(
    datasets: ManagedDatasets,
) -> None:
    datasets.create("big", "detect", ["car"])
    images = [bytes([n]) * (CHUNK_BYTES + 1000) for n in range(3)]
    ids = [datasets.add("big", image, ".jpg", [BOX], source="model") for image in images]
    folder, files = datasets.files("big")
    datasets.item_image("big", ids[2]).unlink()  # gone between the listing and the zip

    chunks = list(zip_chunks(folder, files, "big"))
    assert len(chunks) >= 3  # sent as it is made, not as one piece
    assert max(len(chunk) for chunk in chunks) < 2 * CHUNK_BYTES + 4096
    archive = zipfile.ZipFile(io.BytesIO(b"".join(chunks)))
    assert archive.testzip() is None
    assert archive.read(f"big/images/train/{ids[0]}.jpg") == images[0]
    assert archive.read(f"big/images/val/{ids[1]}.jpg") == images[1]
    assert f"big/images/train/{ids[2]}.jpg" not in archive.namelist()
    assert f"big/labels/train/{ids[2]}.txt" in archive.namelist()


def test_the_labelling_a_reader_gets_is_its_own(datasets: ManagedDatasets) -> None:
    datasets.create("cars", "detect", ["car"], labelling={"train": {"epochs": 5}})
    datasets.get("cars").labelling["train"]["epochs"] = 99
    assert datasets.get("cars").labelling == {"train": {"epochs": 5}}
