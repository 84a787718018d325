"""One error family. Each carries a stable machine `code` (`ErrorCode`, in `codes`); HTTP status
codes are chosen only at the API edge (`api/problems.py`). What a runner raises to fail a job
is in `failures`; every error is importable from here."""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from yolo_orch.errors.aliases import AliasHasNoPrevious as AliasHasNoPrevious
from yolo_orch.errors.aliases import AliasMoved as AliasMoved
from yolo_orch.errors.aliases import AliasNotFound as AliasNotFound
from yolo_orch.errors.aliases import AliasTaskMismatch as AliasTaskMismatch
from yolo_orch.errors.aliases import ModelHasAliases as ModelHasAliases
from yolo_orch.errors.base import YoloOrchError as YoloOrchError
from yolo_orch.errors.codes import ErrorCode as ErrorCode
from yolo_orch.errors.datasets import DatasetExists as DatasetExists
from yolo_orch.errors.datasets import DatasetItemNotFound as DatasetItemNotFound
from yolo_orch.errors.datasets import DatasetNotFound as DatasetNotFound
from yolo_orch.errors.datasets import InvalidDatasetItem as InvalidDatasetItem
from yolo_orch.errors.failures import DatasetNotShared as DatasetNotShared
from yolo_orch.errors.failures import ExportDependencyMissing as ExportDependencyMissing
from yolo_orch.errors.failures import InvalidJobInput as InvalidJobInput
from yolo_orch.errors.failures import InvalidWeights as InvalidWeights
from yolo_orch.errors.failures import JobCancelled as JobCancelled
from yolo_orch.errors.failures import ModelTampered as ModelTampered
from yolo_orch.errors.failures import NoTrialCompleted as NoTrialCompleted
from yolo_orch.errors.failures import RunLost as RunLost
from yolo_orch.errors.failures import SourceLost as SourceLost
from yolo_orch.errors.failures import VariantTampered as VariantTampered
from yolo_orch.errors.label_studio_sync import LabelStudioFailed as LabelStudioFailed
from yolo_orch.errors.label_studio_sync import (
    LabelStudioNotConfigured as LabelStudioNotConfigured,
)
from yolo_orch.errors.label_studio_sync import (
    LabelStudioProjectNotFound as LabelStudioProjectNotFound,
)
from yolo_orch.errors.labelling import LabelConfigInvalid as LabelConfigInvalid
from yolo_orch.errors.labelling import LabellingNotSet as LabellingNotSet
from yolo_orch.errors.labelling import PredictionFailed as PredictionFailed
from yolo_orch.errors.labelling import TaskImageUnavailable as TaskImageUnavailable
from yolo_orch.setting_hints import named, set_setting


class Unauthorized(YoloOrchError):
    code = ErrorCode.UNAUTHORIZED


class Forbidden(YoloOrchError):
    code = ErrorCode.FORBIDDEN


class JobNotFound(YoloOrchError):
    code = ErrorCode.JOB_NOT_FOUND

    def __init__(self, job_id: str) -> None:
        super().__init__(f"no job with id {job_id!r}")
        self.job_id = job_id


class ModelUnusable(YoloOrchError):
    code = ErrorCode.MODEL_UNUSABLE

    def __init__(self, model: str) -> None:
        super().__init__(
            f"model {model!r} is unusable: its file no longer matches its fingerprint; "
            "delete it and import it again"
        )
        self.model = model


class ArtifactNotFound(YoloOrchError):
    code = ErrorCode.ARTIFACT_NOT_FOUND

    def __init__(self, job_id: str, name: str) -> None:
        super().__init__(f"job {job_id} has no artifact named {name!r}")


class FramesNotFound(YoloOrchError):
    code = ErrorCode.FRAMES_NOT_FOUND

    def __init__(self, job_id: str, entry: int) -> None:
        super().__init__(f"entry {entry} of job {job_id}'s result is not a video with frames")


class SnapshotNotFound(YoloOrchError):
    code = ErrorCode.SNAPSHOT_NOT_FOUND

    def __init__(self, job_id: str) -> None:
        super().__init__(
            f"job {job_id} has no snapshot: it is not a stream, or none was written yet"
        )


class ModelNotFound(YoloOrchError):
    code = ErrorCode.MODEL_NOT_FOUND

    def __init__(self, model: str, known: Sequence[str] | None = None) -> None:
        """`known`: the names of the registry's models, to suggest close ones from (None: a
        lookup by id, where names would not help)."""
        hint = "" if known is None else f"; {_what_there_is(model, known)}"
        super().__init__(f"model not found: {model!r} is not available on this host{hint}")
        self.model = model


SUGGESTED_NAMES = 5


def _what_there_is(model: str, known: Sequence[str]) -> str:
    if not known:
        return (
            "no model is registered yet: import weights (POST /v1/models, or yolo-orch models "
            "import FILE)"
        )
    close = difflib.get_close_matches(model, known, n=SUGGESTED_NAMES)
    if close:
        return f"did you mean {', '.join(map(repr, close))}?"
    return f"none of the {len(known)} registered model(s) is close: see GET /v1/models"


class ModelNameTaken(YoloOrchError):
    code = ErrorCode.MODEL_NAME_TAKEN

    def __init__(self, name: str) -> None:
        super().__init__(f"another model is already named {name!r}")
        self.name = name


class ModelInUse(YoloOrchError):
    code = ErrorCode.MODEL_IN_USE

    def __init__(self, ref: str, job_ids: list[str]) -> None:
        shown = ", ".join(job_ids[:5]) + (" ..." if len(job_ids) > 5 else "")
        super().__init__(
            f"model {ref!r} is used by {len(job_ids)} queued or running job(s): {shown}"
        )
        self.ref = ref
        self.job_ids = job_ids


class InvalidJob(YoloOrchError):
    """A submission that is well-formed JSON but cannot run here; `code` says why."""

    def __init__(self, message: str, code: ErrorCode) -> None:
        super().__init__(message)
        self.code = code


class NotAStream(YoloOrchError):
    code = ErrorCode.NOT_A_STREAM

    def __init__(self, job_id: str, kind: str) -> None:
        super().__init__(
            f"job {job_id} is a {kind} job: `since` pages the frames of stream jobs only "
            "(page other results with `offset` and `limit`)"
        )


SHOWN_PATH_CHARS = 200
"""How much of a client's path an error message repeats."""


def shown_path(path: str) -> str:
    """`path` as an error message quotes it: at most SHOWN_PATH_CHARS characters, repr-quoted."""
    if len(path) <= SHOWN_PATH_CHARS:
        return repr(path)
    return f"{path[:SHOWN_PATH_CHARS]!r}... ({len(path)} characters)"


class PathOutsideRoots(YoloOrchError):
    code = ErrorCode.PATH_OUTSIDE_ROOTS

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"{shown_path(path)} is refused: {why}")
        self.path = path


class InvalidPath(YoloOrchError):
    """A client-named path the file system refuses: too long, a symlink loop, a file where a
    folder should be, no permission. `code` says which."""

    def __init__(self, path: str, why: str, code: ErrorCode = ErrorCode.INVALID_PATH) -> None:
        super().__init__(f"{shown_path(path)} cannot be used: {why}")
        self.path = path
        self.code = code


class InputWalkTooLarge(YoloOrchError):
    """Expanding a glob visited more entries, or took longer, than a submission may."""

    code = ErrorCode.INPUT_WALK_TOO_LARGE

    def __init__(self, pattern: str, why: str) -> None:
        super().__init__(f"expanding {shown_path(pattern)} was stopped: {why}")
        self.pattern = pattern


class BodyTooLarge(YoloOrchError):
    code = ErrorCode.BODY_TOO_LARGE

    def __init__(self, limit: int, what: str = "the request body") -> None:
        super().__init__(f"{what} is larger than the {limit} bytes allowed")
        self.limit = limit


class UnsupportedMediaType(YoloOrchError):
    code = ErrorCode.UNSUPPORTED_MEDIA_TYPE


class RangeNotSatisfiable(YoloOrchError):
    """No range of a `Range` header overlaps the file it asks for."""

    code = ErrorCode.RANGE_NOT_SATISFIABLE

    def __init__(self, header: str, size: int) -> None:
        super().__init__(f"no range of {header!r} overlaps the {size} bytes of this file")
        self.size = size


class InvalidCursor(YoloOrchError):
    code = ErrorCode.INVALID_CURSOR


class QueueFull(YoloOrchError):
    code = ErrorCode.QUEUE_FULL

    def __init__(self, max_queued: int, retry_after_s: int = 1) -> None:
        super().__init__(f"the queue is full ({max_queued} jobs waiting); retry later")
        self.max_queued = max_queued
        self.retry_after_s = retry_after_s


class ImportsBusy(YoloOrchError):
    """As many imports (models and variants together) as `max_concurrent_imports` allows are
    under way: each holds its file on disk and, for a variant, two models in memory."""

    code = ErrorCode.IMPORTS_BUSY

    def __init__(self, limit: int, retry_after_s: int) -> None:
        super().__init__(
            f"{limit} import(s) of models or variants are under way, as many as this server "
            f"takes at once ({named('max_concurrent_imports')}); retry later"
        )
        self.limit = limit
        self.retry_after_s = retry_after_s


class IdempotencyKeyReused(YoloOrchError):
    code = ErrorCode.IDEMPOTENCY_KEY_REUSED

    def __init__(self, key: str, job_id: str) -> None:
        super().__init__(
            f"Idempotency-Key {key!r} was already used for job {job_id} with a different request"
        )
        self.key = key
        self.job_id = job_id


class DependencyNotFound(YoloOrchError):
    code = ErrorCode.DEPENDENCY_NOT_FOUND

    def __init__(self, job_id: str) -> None:
        super().__init__(f"job {job_id}, named in after/after_ok, does not exist")
        self.job_id = job_id


class DependencyFailed(YoloOrchError):
    code = ErrorCode.DEPENDENCY_FAILED

    def __init__(self, job_id: str, state: str) -> None:
        super().__init__(f"job {job_id}, named in after_ok, is {state}: this job could never run")
        self.job_id = job_id
        self.state = state


class JobAlreadyFinished(YoloOrchError):
    code = ErrorCode.JOB_FINISHED

    def __init__(self, job_id: str, state: str) -> None:
        super().__init__(f"job {job_id} is already {state}")
        self.job_id = job_id
        self.state = state


class JobActive(YoloOrchError):
    code = ErrorCode.JOB_ACTIVE

    def __init__(self, job_id: str, state: str) -> None:
        super().__init__(f"job {job_id} is {state}; only a finished job can be deleted")
        self.job_id = job_id
        self.state = state


class InsufficientStorage(YoloOrchError):
    """Free space is below `min_free_bytes` where the server would store what it is sent, or
    the disk filled up while it stored it (`full`)."""

    code = ErrorCode.INSUFFICIENT_STORAGE

    def __init__(self, where: list[str], *, full: bool = False) -> None:
        reason = "the disk filled up" if full else f"below {named('min_free_bytes')}"
        super().__init__(
            f"too little free disk space ({', '.join(where)}, {reason}); "
            "nothing was stored, retry once space is freed"
        )
        self.where = where


class ResultNotReady(YoloOrchError):
    """The job is queued or running: it may have a result later."""

    code = ErrorCode.RESULT_NOT_READY

    def __init__(self, job_id: str, state: str) -> None:
        super().__init__(f"job {job_id} is {state}; a result exists only once it has succeeded")
        self.job_id = job_id
        self.state = state


class NoResult(YoloOrchError):
    """The job failed or was cancelled: it will never have a result, so waiting is no use."""

    code = ErrorCode.NO_RESULT

    def __init__(self, job_id: str, state: str) -> None:
        why = "failed: see its error" if state == "failed" else "was cancelled: it has no result"
        super().__init__(f"job {job_id} {why}")
        self.job_id = job_id
        self.state = state


class ResultTooLarge(YoloOrchError):
    """Raised while a job's result is written: it would pass `max_result_bytes`."""

    code = ErrorCode.RESULT_TOO_LARGE

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"the job's result is larger than the {limit} bytes allowed "
            f"({named('max_result_bytes')}); "
            "run fewer images per job, or raise conf or lower max_det"
        )
        self.limit = limit


class ShuttingDown(YoloOrchError):
    code = ErrorCode.SHUTTING_DOWN

    def __init__(self) -> None:
        super().__init__("the server is shutting down and accepts no new jobs")


def no_data_roots() -> InvalidJob:
    return InvalidJob(
        "this server has no data_roots configured: " + set_setting("data_roots", '["/srv/images"]'),
        code=ErrorCode.NO_DATA_ROOTS,
    )


def no_model_roots() -> InvalidJob:
    return InvalidJob(
        "this server has no model_roots configured: "
        + set_setting("model_roots", '["/srv/weights"]'),
        code=ErrorCode.NO_MODEL_ROOTS,
    )


def too_many_gpus(asked: int, most: int, *, on_cluster: bool) -> InvalidJob:
    """`most`: the lanes of this host, or of the largest node of a Ray cluster (a job's lanes
    are all on one node)."""
    where = (
        f"a job's lanes are all on one node, and the cluster's largest node has {most}"
        if on_cluster
        else f"this host has {most}"
    )
    return InvalidJob(
        f"the job asks for {asked} GPUs; {where} lane(s)", code=ErrorCode.TOO_MANY_GPUS
    )


class InstanceLocked(YoloOrchError):
    code = ErrorCode.INSTANCE_LOCKED


class NotActiveHead(YoloOrchError):
    """A write on a head that is not the active one (a standby, or an active fenced off)."""

    code = ErrorCode.NOT_ACTIVE_HEAD


class ModelHasVariants(YoloOrchError):
    code = ErrorCode.MODEL_HAS_VARIANTS

    def __init__(self, ref: str, variant_ids: list[str]) -> None:
        super().__init__(
            f"model {ref!r} has {len(variant_ids)} exported variant(s); delete with cascade=true "
            "to delete them too"
        )
        self.ref = ref
        self.variant_ids = variant_ids


class VariantNotFound(YoloOrchError):
    code = ErrorCode.VARIANT_NOT_FOUND

    def __init__(self, variant_id: str) -> None:
        super().__init__(f"no model variant with id {variant_id!r}")
        self.variant_id = variant_id


class UploadNotFound(YoloOrchError):
    """Only images uploaded with a job are served back; inputs named under a data root are not."""

    code = ErrorCode.UPLOAD_NOT_FOUND

    def __init__(self, job_id: str, index: int) -> None:
        super().__init__(f"job {job_id} has no uploaded input image number {index}")
