"""Checkpoint inspection: real checkpoints are described; pickled code and garbage are refused."""

from __future__ import annotations

import hashlib
import os
import pickle
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from yolo_orch.registry.weights import InvalidWeights, inspect_checkpoint, sha256_file
from yolo_orch.testing.yolo import CLASS_NAMES, build_checkpoint, ensure_ultralytics


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ensure_ultralytics(tmp_path_factory.getbasetemp())
    return build_checkpoint(tmp_path_factory.mktemp("weights") / "tiny.pt")


class _Payload:
    """Unpickling this creates `canary`: proof that loading ran code from the file."""

    def __init__(self, canary: Path) -> None:
        self.canary = canary

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (str(self.canary), "w"))


def _zip_payload(path: Path, canary: Path) -> None:
    import torch

    torch.save({"model": _Payload(canary)}, path)


def _legacy_payload(path: Path, canary: Path) -> None:
    import torch

    torch.save({"model": _Payload(canary)}, path, _use_new_zipfile_serialization=False)


def _raw_pickle_payload(path: Path, canary: Path) -> None:
    path.write_bytes(pickle.dumps({"model": _Payload(canary)}, protocol=2))


def _payload_beside_real_model(path: Path, canary: Path) -> None:
    import torch

    real = build_checkpoint(path.with_name("real.pt"))
    ckpt = torch.load(real, weights_only=False)  # our own file: trusted
    ckpt["extra"] = _Payload(canary)
    torch.save(ckpt, path)


PAYLOADS: list[Callable[[Path, Path], None]] = [
    _zip_payload,
    _legacy_payload,
    _raw_pickle_payload,
    _payload_beside_real_model,
]


def test_inspects_a_real_checkpoint(checkpoint: Path) -> None:
    info = inspect_checkpoint(checkpoint)

    assert info.task == "detect"
    assert info.class_names == CLASS_NAMES
    assert info.architecture == "yolo11n.yaml"
    assert info.ultralytics_version


def test_the_payload_is_live_without_safe_load(tmp_path: Path) -> None:
    """The control: the same payload does run when loaded the ordinary way."""
    import torch

    canary = tmp_path / "canary"
    _zip_payload(tmp_path / "evil.pt", canary)

    loaded = torch.load(tmp_path / "evil.pt", weights_only=False)
    loaded["model"].close()  # the payload returned the file it opened

    assert canary.exists()


@pytest.mark.parametrize("write_payload", PAYLOADS, ids=lambda f: f.__name__.strip("_"))
def test_refuses_pickled_code(
    checkpoint: Path, tmp_path: Path, write_payload: Callable[[Path, Path], None]
) -> None:
    canary = tmp_path / "canary"
    evil = tmp_path / "evil.pt"
    write_payload(evil, canary)

    with pytest.raises(InvalidWeights) as caught:
        inspect_checkpoint(evil)

    assert not canary.exists()
    assert caught.value.code == "invalid_weights"
    assert "evil.pt" in caught.value.message


def test_ultralytics_own_loader_refuses_pickled_code(checkpoint: Path, tmp_path: Path) -> None:
    """The runner loads with `YOLO(path)`; with safe load in force that path is guarded too."""
    from ultralytics.models import YOLO

    canary = tmp_path / "canary"
    _zip_payload(tmp_path / "evil.pt", canary)

    with pytest.raises(TypeError, match="outside the supported"):
        YOLO(str(tmp_path / "evil.pt"))

    assert not canary.exists()


def _random_bytes(path: Path) -> None:
    path.write_bytes(os.urandom(4096))


def _text(path: Path) -> None:
    path.write_text("weights: yolo11n\nthis is not a checkpoint\n")


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _tensor_dict(path: Path) -> None:
    import torch

    torch.save({"weight": torch.zeros(3, 3), "bias": torch.zeros(3)}, path)


def _plain_tensor(path: Path) -> None:
    import torch

    torch.save(torch.zeros(4), path)


def _foreign_module(path: Path) -> None:
    import torch

    torch.save({"model": torch.nn.Linear(2, 2)}, path)


@pytest.mark.parametrize(
    "write",
    [_random_bytes, _text, _empty, _tensor_dict, _plain_tensor, _foreign_module],
    ids=lambda f: f.__name__.strip("_"),
)
def test_refuses_files_that_are_not_checkpoints(
    checkpoint: Path, tmp_path: Path, write: Callable[[Path], None]
) -> None:
    path = tmp_path / "weights.pt"
    write(path)

    with pytest.raises(InvalidWeights):
        inspect_checkpoint(path)


def test_refuses_a_missing_file_and_a_wrong_suffix(checkpoint: Path, tmp_path: Path) -> None:
    with pytest.raises(InvalidWeights, match="no such file"):
        inspect_checkpoint(tmp_path / "absent.pt")
    renamed = tmp_path / "tiny.bin"
    renamed.write_bytes(checkpoint.read_bytes())
    with pytest.raises(InvalidWeights, match=r"\.pt"):
        inspect_checkpoint(renamed)


def test_sha256_file_streams_large_files(tmp_path: Path) -> None:
    data = os.urandom(3 * 1024 * 1024 + 17)
    path = tmp_path / "blob"
    path.write_bytes(data)

    assert sha256_file(path) == hashlib.sha256(data).hexdigest()


def test_an_archive_that_would_inflate_is_refused_before_loading(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.pt"
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("archive/data.pkl", b"\0" * (64 << 20))  # 64 MiB in about 64 KB

    with pytest.raises(InvalidWeights, match="unpacks to 67108864 bytes"):
        inspect_checkpoint(bomb)


def test_a_checkpoint_torch_saved_is_not_taken_for_one_that_inflates(checkpoint: Path) -> None:
    with zipfile.ZipFile(checkpoint) as archive:
        assert sum(info.file_size for info in archive.infolist()) <= checkpoint.stat().st_size
    assert inspect_checkpoint(checkpoint).task == "detect"


def test_a_file_that_is_no_zip_archive_is_refused_before_unpickling(tmp_path: Path) -> None:
    plain = tmp_path / "legacy.pt"
    plain.write_bytes(pickle.PROTO + b"\x02" + b"N0" * (4 << 20) + b"N.")  # 8 MiB of no-ops

    with pytest.raises(InvalidWeights, match="not a zip archive"):
        inspect_checkpoint(plain)
