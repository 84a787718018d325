"""Messages that reach a client name the server's files by their path under their folder, never
by the server's absolute path: the helper, a failed run's error as the dispatcher records it,
and the messages the runners and the dataset checks write themselves. (Through the HTTP API:
`test_error_paths_api.py`.)"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.admission import ScriptedExecutor
from yolo_orch.config import Settings, server_paths
from yolo_orch.dispatch.dispatcher import Dispatcher
from yolo_orch.dispatch.lanes import Lanes
from yolo_orch.domain import JobKind, JobResult, NewJob
from yolo_orch.errors import InvalidJob, PathOutsideRoots
from yolo_orch.files.datasets import load_dataset
from yolo_orch.files.jobfiles import JobFiles
from yolo_orch.files.shown_paths import ShownPaths
from yolo_orch.ops.clock import utcnow
from yolo_orch.params.inference import InferenceParams
from yolo_orch.registry.manifests import copy_tree_hashing, fingerprint_tree
from yolo_orch.registry.weights import ResolvedWeights
from yolo_orch.runners.base import RunContext
from yolo_orch.runners.predict import load_model
from yolo_orch.runners.sources import registry_weights
from yolo_orch.runners.training import YoloTrainingRunner
from yolo_orch.store.memory import InMemoryJobStore
from yolo_orch.testing.training import TrainingRecorder, make_dataset
from yolo_orch.testing.yolo import ensure_ultralytics, fixed_resolver


def test_paths_under_a_known_folder_are_named_from_it() -> None:
    shown = ShownPaths([Path("/srv/data"), Path("/srv/data/var")], {Path("/srv/m/up.pt"): "mine"})

    assert shown.text("missing path '/srv/data/ds/images/val'") == "missing path 'ds/images/val'"
    assert shown.text("no /srv/data/var/jobs/1/best.pt") == "no jobs/1/best.pt"  # the inner one
    assert shown.text("ERROR /srv/m/up.pt is no model") == "ERROR mine is no model"
    assert shown.text("PosixPath('/srv/data')") == "PosixPath('.')"
    assert shown.text("/srv/data2/x.jpg is not /srv/data") == "…/x.jpg is not ."


def test_a_folder_is_known_by_its_real_path_too(tmp_path: Path) -> None:
    real = tmp_path / "real"
    (real / "ds").mkdir(parents=True)
    (tmp_path / "link").symlink_to(real)
    shown = ShownPaths([tmp_path / "link"])

    assert shown.text(f"cannot read {real / 'ds' / 'a.jpg'}") == "cannot read ds/a.jpg"
    assert shown.text(f"cannot read {tmp_path / 'link' / 'ds'}") == "cannot read ds"


def test_other_absolute_paths_keep_their_last_part_and_the_rest_of_the_message_stays() -> None:
    shown = ShownPaths()
    message = (
        "[Errno 2] No such file or directory: '/opt/x/weights.pt' (see "
        "https://docs.ultralytics.com/datasets/detect/, 1/2 done, N/A, ~/notes/a.txt, /tmp)"
    )
    assert shown.text(message) == (
        "[Errno 2] No such file or directory: '…/weights.pt' (see "
        "https://docs.ultralytics.com/datasets/detect/, 1/2 done, N/A, ~/notes/a.txt, /tmp)"
    )
    assert shown.text(shown.text(message)) == shown.text(message)


def test_the_servers_folders_are_data_dir_and_every_root(tmp_path: Path) -> None:
    settings = Settings(
        data_dir=tmp_path / "var",
        data_roots=[tmp_path / "data"],
        model_roots=[tmp_path / "weights"],
        shared_data_roots=[tmp_path / "shared"],
        ray_node_cache_dir=tmp_path / "cache",
    )
    message = " ".join(
        str(tmp_path / part)
        for part in ("var/models/a.pt", "data/ds/x.jpg", "weights/w.pt", "shared/s", "cache/n/c.pt")
    )
    assert server_paths(settings).text(message) == "models/a.pt ds/x.jpg w.pt s n/c.pt"


async def test_a_failed_runs_error_names_the_servers_files_from_their_folders(
    tmp_path: Path,
) -> None:
    settings = Settings(data_dir=tmp_path / "var", data_roots=[tmp_path / "data"])
    files = JobFiles(settings.jobs_dir)

    async def fails(ctx: RunContext) -> JobResult:
        missing = tmp_path / "data" / "ds" / "images" / "val"
        raise FileNotFoundError(f"no images in {missing}, nor in {ctx.workdir / 'a'} or /opt/b/c")

    for shown, expected in [
        (server_paths(settings), "no images in ds/images/val, nor in jobs/{id}/a or …/c"),
        (None, "no images in …/val, nor in …/a or …/c"),
    ]:
        store = InMemoryJobStore()
        dispatcher = Dispatcher(
            store, Lanes(["sim:0"], 1), ScriptedExecutor(1, fails), files, shown_paths=shown
        )
        task = asyncio.create_task(dispatcher.run())
        new = NewJob(kind=JobKind.INFERENCE, model="sim", spec={"params": {}})
        job, _ = await store.create(new, max_queued=10, now=utcnow())
        dispatcher.wake()
        async with asyncio.timeout(10):
            while not (job := await store.get(job.id)).state.is_terminal:
                await asyncio.sleep(0.005)
        await dispatcher.drain(grace_s=1)
        await task

        assert job.error is not None
        assert job.error.message == f"FileNotFoundError: {expected.format(id=job.id)}"


def test_training_that_ends_without_best_pt_names_it_in_the_jobs_folder(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    ensure_ultralytics(tmp_path_factory.getbasetemp())
    dataset = make_dataset(tmp_path / "data" / "ds", n_train=1, n_val=1, size=32)
    monkeypatch.setattr(YoloTrainingRunner, "_train", lambda *args: None)  # makes no weights
    runner = YoloTrainingRunner(
        fixed_resolver({}), lambda *args: {}, data_roots=[tmp_path / "data"], cpu_threads=1
    )

    with pytest.raises(RuntimeError) as raised:
        runner.run(TrainingRecorder().context(tmp_path / "job", dataset, epochs=1))

    assert str(raised.value) == "training ended without train/weights/best.pt in the job's folder"


def _dataset(tmp_path: Path, **entries: Any) -> tuple[Path, Path]:
    root = tmp_path / "data"
    make_dataset(root / "ds", n_train=1, n_val=1, size=32)
    yaml_path = root / "ds" / "data.yaml"
    data = yaml.safe_load(yaml_path.read_text())
    yaml_path.write_text(yaml.safe_dump({**data, **entries}))
    return root, yaml_path


def test_a_data_yaml_changed_after_submission_is_named_under_its_root(tmp_path: Path) -> None:
    root, yaml_path = _dataset(tmp_path)
    outside = tmp_path / "elsewhere.yaml"
    outside.write_text(yaml_path.read_text())

    yaml_path.unlink()
    yaml_path.symlink_to(outside)  # swapped for a link out of the roots
    with pytest.raises(PathOutsideRoots) as out:
        load_dataset(yaml_path, [root])
    yaml_path.unlink()
    yaml_path.mkdir()  # swapped for a folder: the OS names it when it is opened
    with pytest.raises(InvalidJob) as unreadable:
        load_dataset(yaml_path, [root])

    assert out.value.message == "'ds/data.yaml' is refused: it leads outside the data roots"
    assert unreadable.value.message == (
        "data.yaml is not readable YAML: [Errno 21] Is a directory: 'ds/data.yaml'"
    )


def test_an_image_list_that_cannot_be_read_is_named_under_its_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, yaml_path = _dataset(tmp_path, train="train.txt")
    listing = root / "ds" / "train.txt"
    listing.write_text("./images/train/train0.png\n")
    opened = Path.open

    def refused(path: Path, *args: Any, **kwargs: Any) -> Any:
        if path == listing:  # what a file the server may not read says (the tests run as root)
            raise PermissionError(13, "Permission denied", str(path))
        return opened(path, *args, **kwargs)

    monkeypatch.setattr(Path, "open", refused)
    with pytest.raises(InvalidJob) as raised:
        load_dataset(yaml_path, [root])

    assert raised.value.message == (
        "train.txt is not a readable image list: [Errno 13] Permission denied: 'ds/train.txt'"
    )


def test_a_missing_weights_file_is_named_without_its_folder(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    ensure_ultralytics(tmp_path_factory.getbasetemp())
    gone = ResolvedWeights(tmp_path / "models" / "0123.pt", "0123")
    ctx = TrainingRecorder().context(tmp_path / "job", tmp_path / "ds.yaml", model_id="m1")

    with pytest.raises(FileNotFoundError) as loading:
        load_model("cpu", gone, InferenceParams())
    with pytest.raises(FileNotFoundError) as training:
        registry_weights(fixed_resolver({"m1": gone}), ctx)

    assert str(loading.value) == str(training.value) == "weights file 0123.pt is missing"


def test_a_folder_holding_a_link_is_refused_naming_the_link_from_the_folders_parent(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "weights" / "ov_openvino_model"
    (folder / "sub").mkdir(parents=True)
    (folder / "model.xml").write_text("<net/>")
    (folder / "model.bin").symlink_to(folder / "model.xml")
    (folder / "sub" / "linked").symlink_to(folder)

    with pytest.raises(ValueError, match=r"^'ov_openvino_model/model\.bin' is not a regular file$"):
        copy_tree_hashing(folder, tmp_path / "copy", "entry")
    (folder / "model.bin").unlink()
    with pytest.raises(ValueError, match=r"^'ov_openvino_model/sub/linked' is a link$"):
        fingerprint_tree(folder)
