"""What fails a job: what a runner raises, each error with its job's `error.code`."""

from __future__ import annotations

from pathlib import Path

from yolo_orch.errors.base import YoloOrchError
from yolo_orch.errors.codes import ErrorCode


class JobCancelled(YoloOrchError):
    """Raised by a runner when it stops early because cancel was asked."""

    code = ErrorCode.CANCELLED

    def __init__(self, message: str = "cancelled on request") -> None:
        super().__init__(message)


class RunLost(YoloOrchError):
    """A run ended without an outcome because the cluster node it ran on went away: the job
    goes back to the queue, its attempt counted, as after a crash."""

    code = ErrorCode.NODE_LOST


class SourceLost(YoloOrchError):
    """A stream's source could not be read again within its `reconnect_give_up_s`."""

    code = ErrorCode.SOURCE_LOST


class InvalidJobInput(YoloOrchError):
    """Raised by a runner when the job's own input is unusable (not a server fault)."""

    code = ErrorCode.INVALID_INPUT


class DatasetNotShared(YoloOrchError):
    """Raised on a Ray node when a job's dataset is not under `shared_data_roots`, or not on
    that node (its shared folder not mounted there)."""

    code = ErrorCode.DATASET_NOT_SHARED


class InvalidWeights(YoloOrchError):
    """The file is not an ultralytics checkpoint this server can load safely."""

    code = ErrorCode.INVALID_WEIGHTS

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path.name} is not a usable YOLO checkpoint: {reason}")
        self.path = path
        self.reason = reason


class ModelTampered(YoloOrchError):
    """The file on disk no longer has the fingerprint recorded when it was imported."""

    code = ErrorCode.MODEL_TAMPERED

    def __init__(self, path: Path, expected: str, actual: str) -> None:
        super().__init__(
            f"{path.name} changed since it was imported: sha256 {actual} instead of {expected}"
        )
        self.path = path
        self.expected = expected
        self.actual = actual


class ExportDependencyMissing(YoloOrchError):
    """An export or a variant load needs a package this host does not have. The server never
    installs one itself: it comes from the project's extras."""

    code = ErrorCode.EXPORT_DEPENDENCY_MISSING

    def __init__(self, package: str, purpose: str) -> None:
        super().__init__(
            f"{purpose} needs the Python package {package!r}, which is not installed on this host "
            "(install the yolo-orch extra that carries it; the server never installs packages)"
        )
        self.package = package


class VariantTampered(ModelTampered):
    """A file of an exported variant no longer has the fingerprint recorded at registration."""

    def __init__(self, variant_id: str, cause: ModelTampered) -> None:
        super().__init__(cause.path, cause.expected, cause.actual)
        self.message = f"variant {variant_id}: {cause.message}"
        self.args = (self.message,)
        self.variant_id = variant_id


class NoTrialCompleted(YoloOrchError):
    """Raised by a tune none of whose trials completed with a score."""

    code = ErrorCode.NO_TRIAL_COMPLETED
