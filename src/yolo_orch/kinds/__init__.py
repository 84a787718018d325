"""The kinds of job, each in its own module: the one table the API (request bodies, GET /v1/meta),
the job service (submission checks), the dispatcher (batching) and the Ray executor read.

A new kind is a module here (its `Kind`: request body, submission checks, batching) and a line in
`KINDS`; its `JobKind` member and spec class in the domain (the store reads rows with them); its
params model in `yolo_orch.params` (the runners, below this package, read it too); its runner in
each runtime (`runners/yolo.py`, `runners/simulated.py`); its result's shape in
`domain/results.py` (named by its `Kind` and joined to `JobResultDetail`); and its tests. The
service, the store and the dispatcher need no edit."""

from __future__ import annotations

from collections.abc import Mapping

from yolo_orch.domain import JobKind
from yolo_orch.kinds.base import JobRequest, Kind
from yolo_orch.kinds.export import EXPORT
from yolo_orch.kinds.inference import INFERENCE
from yolo_orch.kinds.promote import PROMOTE
from yolo_orch.kinds.stream import STREAM
from yolo_orch.kinds.training import TRAINING
from yolo_orch.kinds.tune import TUNE
from yolo_orch.kinds.validation import VALIDATION

KINDS: Mapping[JobKind, Kind] = {
    kind.name: kind for kind in (INFERENCE, TRAINING, VALIDATION, EXPORT, STREAM, PROMOTE, TUNE)
}
"""Every kind, by name, in the order the API documents them."""

__all__ = ["KINDS", "JobRequest", "Kind"]
