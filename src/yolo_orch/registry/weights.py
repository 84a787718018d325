"""Weights files: fingerprint them and read what they are without running code from them.

A `.pt` file is a pickle, and ultralytics unpickles with `weights_only=False` by default: loading
an untrusted file runs whatever it carries. `inspect_checkpoint` always loads with ultralytics'
restricted loader (`weights_only=True` plus an allow-list of model classes), whatever the
environment says, so an imported file is inspected before anything loads it the ordinary way.
Call `configure_ultralytics` before the first call (it imports ultralytics).
"""

from __future__ import annotations

import hashlib
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yolo_orch.errors import InvalidWeights, ModelTampered
from yolo_orch.files.class_names import in_id_order
from yolo_orch.params.inference import INFERENCE_TASKS

__all__ = [
    "CheckpointInfo",
    "InvalidWeights",
    "ModelTampered",
    "ResolvedWeights",
    "inspect_checkpoint",
    "sha256_file",
]

_CHUNK = 1 << 20
_MAX_EXPANSION = 2
"""torch saves the members of a checkpoint uncompressed: an archive that expands to more than
twice its size (plus `_EXPANSION_SLACK`) is not one torch wrote, and unpacking it may cost
minutes (a 400 KB `data.pkl` that inflates to 400 MB, then unpickled)."""
_EXPANSION_SLACK = 1 << 20


@dataclass(frozen=True)
class ResolvedWeights:
    """Where a model reference points: the file and the fingerprint it must still have."""

    path: Path
    sha256: str
    task: str | None = None
    """The registry's task for the model (an exported variant's file is loaded as this task)."""


@dataclass(frozen=True)
class CheckpointInfo:
    task: str
    """`detect`, `segment`, `classify`, `pose`, `obb`, ..."""
    class_names: tuple[str, ...]
    """Indexed by class id."""
    architecture: str | None
    """The model config it was built from (`yolo11n.yaml`), when the checkpoint records it."""
    ultralytics_version: str | None


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def inspect_checkpoint(path: Path) -> CheckpointInfo:
    """Load `path` once with the restricted loader and describe the model in it.

    Raises `InvalidWeights` for anything that is not a loadable ultralytics model: a pickle that
    references code outside the allow-list, random bytes, a text file, a plain tensor dict.
    """
    import torch
    from ultralytics.nn.tasks import BaseModel, _SafeLoad, torch_safe_load

    if path.suffix.lower() != ".pt":
        raise InvalidWeights(path, "the file name must end in .pt")
    if not path.is_file():
        # ultralytics would search GitHub for a missing .pt; never hand it one.
        raise InvalidWeights(path, "no such file")
    if not _SafeLoad.SUPPORTED:  # torch < 2.6: safe_only would silently load unrestricted
        raise RuntimeError(f"torch {torch.__version__} cannot load checkpoints safely (needs 2.6+)")
    _refuse_unlike_torch(path)
    try:
        ckpt, _ = torch_safe_load(str(path), safe_only=True)  # type: ignore[no-untyped-call]
    except Exception as e:  # a file from outside: every way it fails to load is a bad file
        raise InvalidWeights(path, _first_line(e)) from e
    if not isinstance(ckpt, dict):
        raise InvalidWeights(path, f"holds a {type(ckpt).__name__}, not a checkpoint dict")
    model: Any = ckpt.get("ema") or ckpt.get("model")
    if not isinstance(model, BaseModel):
        raise InvalidWeights(path, "holds no ultralytics model under 'model' or 'ema'")
    task = _served_task(path, model)
    yaml: Any = getattr(model, "yaml", None)
    architecture = yaml.get("yaml_file") if isinstance(yaml, dict) else None
    version = ckpt.get("version")
    return CheckpointInfo(
        task=task,
        class_names=_class_names(path, getattr(model, "names", None)),
        architecture=str(architecture) if architecture else None,
        ultralytics_version=str(version) if version else None,
    )


def _refuse_unlike_torch(path: Path) -> None:
    """`InvalidWeights` for what torch's own format is not, before anything unpickles it: a
    file that is no zip archive (torch has saved checkpoints as zip archives since 1.6; the
    restricted unpickler took 36 s and 340 MB over a 40 MB plain pickle of no-ops), or one
    whose members declare more bytes than torch would store."""
    try:
        with zipfile.ZipFile(path) as archive:
            declared = sum(info.file_size for info in archive.infolist())
    except (zipfile.BadZipFile, OSError, EOFError):
        raise InvalidWeights(
            path,
            "not a zip archive as torch saves checkpoints (since 1.6): re-save it with "
            "torch.save to import it",
        ) from None
    size = path.stat().st_size
    if declared > _MAX_EXPANSION * size + _EXPANSION_SLACK:
        raise InvalidWeights(
            path, f"it unpacks to {declared} bytes from {size}: not a checkpoint torch saved"
        )


def _served_task(path: Path, model: object) -> str:
    """The task inference serves the model as, or `InvalidWeights` saying why it is not served."""
    from ultralytics.nn.tasks import RTDETRDetectionModel, WorldModel, YOLOEModel, guess_model_task

    if isinstance(model, WorldModel | YOLOEModel):
        # Their classes come from text prompts: setting them needs a CLIP text encoder that
        # ultralytics downloads, and this server never reaches the network.
        raise InvalidWeights(path, "open-vocabulary models (YOLO-World, YOLOE) are not served")
    if isinstance(model, RTDETRDetectionModel):
        return "detect"  # no head name ultralytics' guess knows; its predictor yields boxes
    task = getattr(model, "task", None) or guess_model_task(model)  # type: ignore[no-untyped-call]
    if task not in INFERENCE_TASKS:
        raise InvalidWeights(
            path, f"the model's task ({task or 'unknown'}) is none of {', '.join(INFERENCE_TASKS)}"
        )
    return str(task)


def _class_names(path: Path, names: object) -> tuple[str, ...]:
    if isinstance(names, list | tuple):
        return tuple(str(n) for n in names)
    if not isinstance(names, dict) or not names:
        raise InvalidWeights(path, "the model has no class names")
    ordered = in_id_order(names)
    if ordered is None:
        raise InvalidWeights(path, "class ids are not 0..n-1")
    return tuple(str(name) for name in ordered)


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    message = text[0] if text else ""
    return f"{type(e).__name__}: {message}" if message else type(e).__name__
